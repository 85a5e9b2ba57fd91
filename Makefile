# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of tcp_copa.ko and tcp_copa_policer.ko.
#
#   make                  build against KDIR
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
# KDIR defaults to the running kernel's build tree and falls back to the
# headers of the kernel the VM boots (scripts/vm-kernel), so the modules
# build on a host that cannot load them.

ifneq ($(KDIR),)
KVER ?= $(shell sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h 2>/dev/null)
else
KVER ?= $(shell uname -r)
ifeq ($(wildcard /lib/modules/$(KVER)/build/Makefile),)
KVER := $(shell scripts/vm-kernel 2>/dev/null)
endif
KDIR := /lib/modules/$(KVER)/build
endif

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	$(MAKE) -C bpf clean

install: modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules_install
	depmod -a $(KVER)

# make install puts the modules in extra/ or updates/ (the kernel's
# INSTALL_MOD_DIR default changed), perhaps compressed: remove any of them.
# INSTALL_MOD_PATH is honoured as by modules_install.
DEPMOD ?= depmod
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

.PHONY: all modules clean install demo check bench bench-ablation lint
.PHONY: matrix bpf fuzz
.PHONY: uninstall deb htmldocs
