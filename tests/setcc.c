// SPDX-License-Identifier: GPL-2.0
/*
 * setcc - pick a TCP congestion control with setsockopt(TCP_CONGESTION)
 * and report what the kernel did with it.
 *
 * Usage:
 *   setcc --check NAME
 *	Set NAME on a fresh TCP socket and exit: 0 if the kernel accepted
 *	it, 1 if not. Prints one JSON line, e.g.
 *	{"ok":false,"cc":"copa","errno":"EPERM","error":"Operation not permitted"}
 *	and the error in words on stderr.
 *
 *   setcc [--cc NAME] [--time SEC | --bytes N] [--rate BYTES_PER_SEC]
 *	   [--count N] [--parallel P] [--hold SEC] HOST PORT
 *	Connect to HOST:PORT (IPv4 or IPv6), with NAME set before connect,
 *	send for SEC seconds or N bytes (default 1 MB), optionally limited
 *	by the application to BYTES_PER_SEC, shut down the write side and
 *	wait for the peer to close. Then print one JSON line per connection:
 *	{"ok":true,"cc":"copa","bytes_sent":..,"bytes_acked":..,
 *	 "bytes_retrans":..,"total_retrans":..,"rtt_us":..,"rttvar_us":..,
 *	 "cwnd":..,"delivery_rate":..,"duration_s":..}
 *	where cc is getsockopt(TCP_CONGESTION) and the rest is tcp_info.
 *	A failed connection prints {"ok":false,"stage":..,"errno":..,...}.
 *	--count N makes N connections one after another, --parallel P runs
 *	P such processes at once (P x N lines). --hold SEC keeps each socket
 *	open SEC seconds after its line is printed. SIGTERM or SIGINT ends
 *	the sending early (in every process); the connections open then
 *	still close cleanly and report.
 *	--burst N sends the data in bursts of N bytes: after each burst it
 *	waits until everything sent is acknowledged, then stays idle SEC
 *	seconds (--idle, default 1.5) before the next. For every burst after
 *	the first it prints, before the connection's line, one line
 *	{"burst":I,"before":{..},"start":{..},"window_s":..,"window_bytes":..}
 *	where "before" is tcp_info (delivery_rate, pacing_rate, cwnd, rtt_us,
 *	bytes_sent) once the previous burst was acknowledged, "start" the same
 *	right after the burst's first send(), and window_bytes the bytes the
 *	socket transmitted in the window_s seconds (at least half the "before"
 *	rtt) that followed "start": the rate at which the first round after
 *	the idle period left.
 *
 *   setcc --sink [--cc NAME] [--bind ADDR] PORT
 *	Accept connections on PORT (default address 0.0.0.0), read and
 *	discard their data, close each at EOF. Prints {"listening":PORT}
 *	once ready and, on SIGTERM or SIGINT,
 *	{"connections":N,"bytes":N} before exiting 0.
 *
 * Exit status: 0 success, 1 a setsockopt or connection failed, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/tcp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 16384
#define CC_NAME_MAX 16 /* TCP_CA_NAME_MAX */
#define PEER_CLOSE_TIMEOUT_S 30

struct opts {
	const char *cc;
	const char *host;
	const char *port;
	const char *bind_addr;
	double seconds;
	uint64_t bytes;
	uint64_t rate;
	unsigned long count;
	unsigned long parallel;
	double hold;
	uint64_t burst;
	double idle;
};

static volatile sig_atomic_t stop;

static void usage(void)
{
	fprintf(stderr,
		"usage: setcc --check NAME\n"
		"       setcc [--cc NAME] [--time SEC | --bytes N] [--rate B/s]\n"
		"             [--count N] [--parallel P] [--hold SEC]\n"
		"             [--burst N [--idle SEC]] HOST PORT\n"
		"       setcc --sink [--cc NAME] [--bind ADDR] PORT\n");
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_for(double seconds)
{
	struct timespec ts;

	if (seconds <= 0)
		return;
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR && !stop)
		;
}

/* One JSON line for a failed step; also the error in words on stderr. */
static void report_error(const char *stage, const char *cc, int err)
{
	const char *name = strerrorname_np(err);

	fprintf(stderr, "setcc: %s%s%s: %s (%s)\n", stage, cc ? " " : "",
		cc ? cc : "", strerror(err), name ? name : "?");
	printf("{\"ok\":false,\"stage\":\"%s\",\"cc\":\"%s\",\"errno\":\"%s\",\"error\":\"%s\"}\n",
	       stage, cc ? cc : "", name ? name : "?", strerror(err));
	fflush(stdout);
}

static int set_cc(int fd, const char *cc)
{
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) < 0) {
		report_error("setsockopt TCP_CONGESTION", cc, errno);
		return -1;
	}
	return 0;
}

static int check_cc(const char *cc)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int ret;

	if (fd < 0) {
		report_error("socket", NULL, errno);
		return 1;
	}
	ret = set_cc(fd, cc);
	close(fd);
	if (ret)
		return 1;
	printf("{\"ok\":true,\"cc\":\"%s\"}\n", cc);
	return 0;
}

static struct addrinfo *resolve(const char *host, const char *port, bool passive)
{
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	struct addrinfo *ai;
	int ret = getaddrinfo(host, port, &hints, &ai);

	if (ret) {
		fprintf(stderr, "setcc: %s port %s: %s\n", host, port, gai_strerror(ret));
		exit(2);
	}
	return ai;
}

/* Send o->bytes, or for o->seconds, paced to o->rate if set. */
static int send_data(int fd, const struct opts *o, uint64_t *sent)
{
	static char buf[CHUNK];
	double start = now();
	uint64_t chunk = CHUNK;

	/* Paced sends come about ten times a second. */
	if (o->rate && o->rate / 10 < chunk)
		chunk = o->rate / 10 ? o->rate / 10 : 1;
	*sent = 0;
	while (!stop) {
		uint64_t want = chunk;
		ssize_t n;

		if (o->seconds > 0 && now() - start >= o->seconds)
			break;
		if (o->seconds <= 0) {
			if (*sent >= o->bytes)
				break;
			if (o->bytes - *sent < want)
				want = o->bytes - *sent;
		}
		n = send(fd, buf, want, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		*sent += n;
		if (o->rate)
			sleep_for(start + (double)*sent / o->rate - now());
	}
	return 0;
}

static void get_info(int fd, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len);
}

static void print_info(const char *name, const struct tcp_info *ti)
{
	printf("\"%s\":{\"delivery_rate\":%llu,\"pacing_rate\":%llu,\"cwnd\":%u,"
	       "\"rtt_us\":%u,\"bytes_sent\":%llu,\"ca_state\":%u}", name,
	       (unsigned long long)ti->tcpi_delivery_rate,
	       (unsigned long long)ti->tcpi_pacing_rate, ti->tcpi_snd_cwnd,
	       ti->tcpi_rtt, (unsigned long long)ti->tcpi_bytes_sent,
	       ti->tcpi_ca_state);
}

/* Wait until everything sent so far is acknowledged. */
static void wait_acked(int fd)
{
	struct tcp_info ti;

	for (;;) {
		get_info(fd, &ti);
		if (!ti.tcpi_unacked && !ti.tcpi_notsent_bytes)
			return;
		if (stop)
			return;
		sleep_for(0.001);
	}
}

/* Send up to @want bytes without blocking; add what was queued to @sent. */
static int send_some(int fd, uint64_t want, int flags, uint64_t *sent)
{
	static char buf[CHUNK];
	ssize_t n = send(fd, buf, want < CHUNK ? want : CHUNK, flags);

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	*sent += n;
	return 0;
}

/* o->bytes in bursts of o->burst with o->idle seconds between them. */
static int send_bursts(int fd, const struct opts *o, uint64_t *sent)
{
	unsigned long i;

	*sent = 0;
	for (i = 0; *sent < o->bytes && !stop; i++) {
		uint64_t end = *sent + o->burst;
		struct tcp_info before, start, after;
		double t0, t1, window;

		if (end > o->bytes)
			end = o->bytes;
		if (i) {
			wait_acked(fd);
			get_info(fd, &before);
			sleep_for(o->idle);
		}
		if (send_some(fd, end - *sent, 0, sent) < 0)
			return -1;
		get_info(fd, &start);
		t0 = now();
		window = i ? before.tcpi_rtt / 2e6 : 0;
		/* The first half round: keep the socket fed, do not block. */
		while (now() - t0 < window && *sent < end && !stop) {
			if (send_some(fd, end - *sent, MSG_DONTWAIT, sent) < 0)
				return -1;
			sleep_for(0.0005);
		}
		while (now() - t0 < window && !stop)
			sleep_for(0.0005);
		get_info(fd, &after);
		t1 = now();
		while (*sent < end && !stop) {
			if (send_some(fd, end - *sent, 0, sent) < 0)
				return -1;
		}
		if (!i)
			continue;
		printf("{\"burst\":%lu,", i);
		print_info("before", &before);
		putchar(',');
		print_info("start", &start);
		printf(",\"window_s\":%.6f,\"window_bytes\":%llu}\n", t1 - t0,
		       (unsigned long long)(after.tcpi_bytes_sent -
					    start.tcpi_bytes_sent));
		fflush(stdout);
	}
	return 0;
}

/* Wait for the peer to close after it read everything we sent. */
static int wait_peer_close(int fd)
{
	struct timeval tv = { .tv_sec = PEER_CLOSE_TIMEOUT_S };
	char buf[512];
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while ((n = recv(fd, buf, sizeof(buf), 0)) != 0) {
		if (n < 0 && errno != EINTR)
			return -1;
	}
	return 0;
}

static void report_connection(int fd, uint64_t sent, double duration)
{
	char cc[CC_NAME_MAX] = "";
	socklen_t cclen = sizeof(cc);
	struct tcp_info ti;
	socklen_t tilen = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cclen);
	getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tilen);
	printf("{\"ok\":true,\"cc\":\"%.*s\",\"bytes_sent\":%llu,\"bytes_acked\":%llu,"
	       "\"bytes_retrans\":%llu,\"total_retrans\":%u,\"rtt_us\":%u,"
	       "\"rttvar_us\":%u,\"cwnd\":%u,\"mss\":%u,\"delivery_rate\":%llu,"
	       "\"duration_s\":%.3f}\n",
	       (int)strnlen(cc, sizeof(cc)), cc, (unsigned long long)sent,
	       (unsigned long long)ti.tcpi_bytes_acked,
	       (unsigned long long)ti.tcpi_bytes_retrans, ti.tcpi_total_retrans,
	       ti.tcpi_rtt, ti.tcpi_rttvar, ti.tcpi_snd_cwnd, ti.tcpi_snd_mss,
	       (unsigned long long)ti.tcpi_delivery_rate, duration);
	fflush(stdout);
}

/* One connection: returns 0 if it completed. */
static int run_connection(const struct opts *o, const struct addrinfo *ai)
{
	double start = now();
	uint64_t sent;
	int fd, ret = 1;

	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0) {
		report_error("socket", o->cc, errno);
		return 1;
	}
	if (o->cc && set_cc(fd, o->cc))
		goto out;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		report_error("connect", o->cc, errno);
		goto out;
	}
	if ((o->burst ? send_bursts(fd, o, &sent) : send_data(fd, o, &sent)) < 0) {
		report_error("send", o->cc, errno);
		goto out;
	}
	if (shutdown(fd, SHUT_WR) < 0 || wait_peer_close(fd) < 0) {
		report_error("close", o->cc, errno);
		goto out;
	}
	report_connection(fd, sent, now() - start);
	sleep_for(o->hold);
	ret = 0;
out:
	close(fd);
	return ret;
}

static int run_sender(const struct opts *o)
{
	struct addrinfo *ai = resolve(o->host, o->port, false);
	unsigned long i;
	int ret = 0;

	for (i = 0; i < o->count && !stop; i++)
		ret |= run_connection(o, ai);
	freeaddrinfo(ai);
	return ret;
}

/* Fork o->parallel senders and pass SIGTERM/SIGINT on to them; fail if
 * any of them failed.
 */
static int run_parallel(const struct opts *o)
{
	pid_t *pids = calloc(o->parallel, sizeof(*pids));
	unsigned long i, started = 0, left;
	bool forwarded = false;
	int status, ret = 0;

	if (!pids)
		return 1;
	fflush(stdout);
	for (; started < o->parallel; started++) {
		pid_t pid = fork();

		if (pid < 0) {
			report_error("fork", NULL, errno);
			ret = 1;
			break;
		}
		if (pid == 0)
			exit(run_sender(o));
		pids[started] = pid;
	}
	for (left = started; left;) {
		if (wait(&status) < 0) {
			if (errno != EINTR)
				break;
			if (stop && !forwarded) {
				for (i = 0; i < started; i++)
					kill(pids[i], SIGTERM);
				forwarded = true;
			}
			continue;
		}
		left--;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			ret = 1;
	}
	free(pids);
	return ret;
}

static int listen_on(const struct opts *o)
{
	struct addrinfo *ai = resolve(o->bind_addr, o->port, true);
	int one = 1, fd;

	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0) {
		report_error("socket", NULL, errno);
		exit(1);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (o->cc && set_cc(fd, o->cc))
		exit(1);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
		report_error("listen", NULL, errno);
		exit(1);
	}
	freeaddrinfo(ai);
	return fd;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Read and discard from every accepted connection until SIGTERM/SIGINT. */
static int run_sink(const struct opts *o)
{
	static char buf[65536];
	struct rlimit rl;
	struct pollfd *pfd;
	nfds_t n = 1, i, max;
	unsigned long conns = 0;
	unsigned long long bytes = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	max = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;
	pfd = calloc(max, sizeof(*pfd));
	if (!pfd)
		exit(1);
	pfd[0].fd = listen_on(o);
	pfd[0].events = POLLIN;
	printf("{\"listening\":%s}\n", o->port);
	fflush(stdout);

	while (!stop) {
		if (poll(pfd, n, -1) < 0)
			continue;
		for (i = n; i-- > 1;) {
			ssize_t r;

			if (!pfd[i].revents)
				continue;
			r = recv(pfd[i].fd, buf, sizeof(buf), 0);
			if (r > 0) {
				bytes += r;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			close(pfd[i].fd);
			pfd[i] = pfd[--n];
		}
		if ((pfd[0].revents & POLLIN) && n < max) {
			int fd = accept(pfd[0].fd, NULL, NULL);

			if (fd >= 0) {
				pfd[n].fd = fd;
				pfd[n].events = POLLIN;
				n++;
				conns++;
			}
		}
	}
	printf("{\"connections\":%lu,\"bytes\":%llu}\n", conns, bytes);
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static unsigned long long parse_number(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-')
		usage();
	return v;
}

static double parse_seconds(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < 0)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "check", required_argument, NULL, 'C' },
		{ "sink", no_argument, NULL, 'S' },
		{ "cc", required_argument, NULL, 'c' },
		{ "bind", required_argument, NULL, 'B' },
		{ "time", required_argument, NULL, 't' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "rate", required_argument, NULL, 'r' },
		{ "count", required_argument, NULL, 'n' },
		{ "parallel", required_argument, NULL, 'P' },
		{ "hold", required_argument, NULL, 'H' },
		{ "burst", required_argument, NULL, 'u' },
		{ "idle", required_argument, NULL, 'i' },
		{}
	};
	struct opts o = {
		.bytes = 1000000, .count = 1, .parallel = 1, .bind_addr = "0.0.0.0",
		.idle = 1.5,
	};
	const char *check = NULL;
	bool sink = false;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'C': check = optarg; break;
		case 'S': sink = true; break;
		case 'c': o.cc = optarg; break;
		case 'B': o.bind_addr = optarg; break;
		case 't': o.seconds = parse_seconds(optarg); break;
		case 'b': o.bytes = parse_number(optarg); break;
		case 'r': o.rate = parse_number(optarg); break;
		case 'n': o.count = parse_number(optarg); break;
		case 'P': o.parallel = parse_number(optarg); break;
		case 'H': o.hold = parse_seconds(optarg); break;
		case 'u': o.burst = parse_number(optarg); break;
		case 'i': o.idle = parse_seconds(optarg); break;
		default: usage();
		}
	}
	install_signals();
	if (check) {
		if (optind != argc)
			usage();
		return check_cc(check);
	}
	if (sink) {
		if (optind + 1 != argc)
			usage();
		o.port = argv[optind];
		return run_sink(&o);
	}
	if (optind + 2 != argc || !o.count || !o.parallel ||
	    (o.burst && o.seconds > 0))
		usage();
	o.host = argv[optind];
	o.port = argv[optind + 1];
	return o.parallel > 1 ? run_parallel(&o) : run_sender(&o);
}
