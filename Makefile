# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of tcp_copa.ko and tcp_copa_policer.ko.
#
#   make                  build for the running kernel, or for KDIR=
#   make install          modules_install + depmod (run as root)
#   make uninstall        remove what make install installed, then depmod
#   make dkms-install     copy DKMS_FILES to /usr/src/tcp-copa-VERSION,
#                         dkms add, build and install them (run as root)
#   make dkms-uninstall   dkms remove from every kernel, delete the copy
#   make deb              Debian packages tcp-copa-dkms and copa-tools (deb/)
#   make htmldocs         Documentation/*.rst with Sphinx, warnings as errors
#   make demo             boot a VM, compare copa with cubic and bbr
#   make check            build, unit tests and the VM test suite
#   make bench            the fixed benchmark set (copa-eval --vm bench)
#   make bench-ablation   the ablation set on builds without each mechanism
#   make lint             checkpatch --strict, sparse, W=1
#   make matrix           build and smoke-test on every supported kernel
#   make bpf              the BPF struct_ops build (bpf/, see Documentation/bpf.rst)
#   make fuzz             fuzz the algorithm for FUZZ_SECS (60) s (tests/fuzz)
#
# KDIR is the kernel build tree, by default the running kernel's
# (/lib/modules/$(uname -r)/build, from its headers package); KVER, the
# release make install and make uninstall work on, is KDIR's. A missing
# KDIR stops the build: it never builds for a kernel other than the one
# asked for. The targets that boot the VM (demo, check, bench,
# bench-ablation, matrix) and make lint build for their kernels
# themselves, which scripts/deps and scripts/kernels fetch into
# ${COPA_CACHE:-~/.cache/copa}, not onto the host.

ifneq ($(KDIR),)
KVER ?= $(shell sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h 2>/dev/null)
else
KVER ?= $(shell uname -r)
KDIR := /lib/modules/$(KVER)/build
endif
VERSION := $(shell cat VERSION)

# What DKMS needs to build the modules (besides dkms.conf, which the
# Debian package writes itself): make dkms-install and debian/rules copy
# these.
DKMS_FILES := Kbuild Makefile VERSION \
	$(filter-out %.mod.c,$(wildcard tcp_copa*.c tcp_copa*.h))
DKMS_SRC := /usr/src/tcp-copa-$(VERSION)
DKMS ?= dkms

all: modules

modules: kdir
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean: kdir
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	$(MAKE) -C bpf clean

# Stop, saying what to install, when KDIR is not a kernel build tree.
kdir:
ifeq ($(origin KDIR),file)
	@test -f $(KDIR)/Makefile || { \
	echo "No headers for kernel $(KVER): $(KDIR) is missing."; \
	echo "Install them (Debian: apt install linux-headers-$(KVER)),"; \
	echo "or build for another kernel with make KDIR=its-build-tree."; \
	exit 1; } >&2
else
	@test -f $(KDIR)/Makefile || { \
	echo "KDIR=$(KDIR) is not a kernel build tree (it has no Makefile)." >&2; \
	exit 1; }
endif

# INSTALL_MOD_PATH is honoured as by modules_install, by depmod too.
DEPMOD ?= depmod
install: modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules_install
	$(DEPMOD) $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) -a $(KVER)

# make install puts the modules in extra/ or updates/ (the kernel's
# INSTALL_MOD_DIR default changed), perhaps compressed: remove any of them.
COPA_MODULES := tcp_copa tcp_copa_policer
uninstall:
	rm -f $(foreach d,extra updates $(INSTALL_MOD_DIR),$(foreach m,$(COPA_MODULES),\
		$(foreach z,.ko .ko.xz .ko.zst .ko.gz,\
		$(INSTALL_MOD_PATH)/lib/modules/$(KVER)/$(d)/$(m)$(z))))
	$(DEPMOD) $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) -a $(KVER)

# DKMS builds the modules for this kernel now and for each one installed
# later. -k $(KVER) as for make install.
dkms-install: kdir
	@command -v $(DKMS) >/dev/null || { \
	echo "No $(DKMS): install it (Debian: apt install dkms)" >&2; exit 1; }
	@! $(DKMS) status -m tcp-copa -v $(VERSION) | grep -q . || { \
	echo "tcp-copa/$(VERSION) is in DKMS already: make dkms-uninstall first" >&2; \
	exit 1; }
	install -d $(DKMS_SRC)
	install -m 644 dkms.conf $(DKMS_FILES) $(DKMS_SRC)/
	$(DKMS) add -m tcp-copa -v $(VERSION)
	$(DKMS) build -m tcp-copa -v $(VERSION) -k $(KVER)
	$(DKMS) install -m tcp-copa -v $(VERSION) -k $(KVER)

dkms-uninstall:
	! $(DKMS) status -m tcp-copa -v $(VERSION) | grep -q . || \
		$(DKMS) remove -m tcp-copa -v $(VERSION) --all
	rm -rf $(DKMS_SRC)

print-%:
	@echo $($*)

deb:
	scripts/mkdeb

htmldocs:
	scripts/htmldocs

demo:
	scripts/demo

check:
	scripts/check

bench:
	scripts/bench

bench-ablation:
	scripts/bench-ablation

lint:
	scripts/lint

matrix:
	scripts/matrix

# VMLINUX_BTF=path builds against another kernel's BTF.
bpf:
	scripts/deps bpf
	$(MAKE) -C bpf

fuzz:
	scripts/deps fuzz
	$(MAKE) -C tests/fuzz check

.PHONY: all modules kdir clean install demo check bench bench-ablation lint
.PHONY: matrix bpf fuzz
.PHONY: uninstall dkms-install dkms-uninstall deb htmldocs
