# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of tcp_copa.ko and tcp_copa_policer.ko.
#
#   make                  build for the running kernel, or for KDIR=
#   make install          modules_install + depmod (run as root)
#   make uninstall        remove what make install installed, then depmod
#   make deb              Debian packages tcp-copa-dkms and copa-tools (deb/)
#   make htmldocs         Documentation/*.rst with Sphinx, warnings as errors
#   make demo             boot a VM, compare copa with cubic and bbr
#   make check            build, unit tests and the VM test suite
#   make bench            the fixed benchmark set (scripts/copa-eval)
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
.PHONY: uninstall deb htmldocs
