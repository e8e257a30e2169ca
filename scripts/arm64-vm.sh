#!/usr/bin/env bash
# arm64-vm.sh - an emulated arm64 Debian 12 for arenactl's arm64 checks
# (docs/arm64.md).
#
#   arm64-vm.sh check              say which tools are missing (installs nothing)
#   arm64-vm.sh build              build the image once into the cache
#   arm64-vm.sh run [-t SECONDS] [-o OUTDIR] JOBDIR CMD...
#                                  boot the image, copy JOBDIR to /job in it,
#                                  run CMD (bash -c, as root, in /job), copy
#                                  /job/out back to OUTDIR, power off
#   arm64-vm.sh path               print the cache directory
#
# The cache is $ARENACTL_ARM64_CACHE, by default
# ${XDG_CACHE_HOME:-/var/cache}/arenactl-arm64. It holds:
#   rootfs/    Debian 12 (bookworm) arm64, debootstrap --variant=minbase, its
#              second stage run in a chroot under qemu-user-static; its
#              lib/aarch64-linux-gnu is the glibc the targets run under
#   root.img   rootfs as an ext4 image (mkfs.ext4 -d: nothing is mounted)
#   vmlinuz    Debian 12's linux-image-*-cloud-arm64 kernel (apt-get download
#              with a private apt state; the host's package lists are untouched)
#   vmlinuz-16k, root.cpio
#              with ARENACTL_ARM64_PAGES=16k: Debian 13's arm64-16k kernel (no
#              16 KiB-page kernel in Debian 12) and rootfs as an initramfs
#
# The guest boots without an initramfs: its root is an NVMe disk (the cloud
# kernel builds NVMe in; virtio-blk and 9p are modules or absent, so the job
# goes in and the results come out as tar archives on two more raw NVMe
# disks, not a shared directory). The root disk is opened with snapshot=on:
# nothing a run writes reaches the cached image. The 16k kernel has NVMe as a
# module: it boots from root.cpio with the job appended as a second cpio
# archive, and the results come out through a virtio serial port. PID 1 is the script
# /sbin/arenactl-vm-init written below: it mounts /proc, /sys, /dev, a tmpfs
# /tmp, tracefs, unpacks the job, runs the command with a timeout, writes
# /job/out plus the command's stdout, stderr and exit status, and powers off.
#
# The run prints the command's stdout and stderr as its own and exits with the
# command's status; a VM that does not come up or does not finish in time is
# one line on stderr and exit status 125 (the console log is kept in the
# cache's log/ directory). Every step is bounded by a timeout.
#
# Environment: ARENACTL_ARM64_CACHE (above), ARENACTL_ARM64_CPU (qemu -cpu,
# default "max,pauth-impdef=on": pointer authentication present, computed
# the fast way), ARENACTL_ARM64_MACHINE (qemu -M, default "virt";
# "virt,mte=on" gives the guest memory tagging), ARENACTL_ARM64_SMP (2), ARENACTL_ARM64_MEM (2G),
# ARENACTL_ARM64_BOOT_LIMIT (240 s), ARENACTL_ARM64_PAGES (4k, or 16k: the
# same userland under a kernel with 16 KiB pages).
set -Eeuo pipefail
# Anything that fails unexpectedly says where, in one line, and is status 125
# like every other failure of the script's own.
trap 'echo "arm64-vm.sh: line $LINENO failed (status $?)" >&2; exit 125' ERR

CACHE=${ARENACTL_ARM64_CACHE:-${XDG_CACHE_HOME:-/var/cache}/arenactl-arm64}
CPU=${ARENACTL_ARM64_CPU:-max,pauth-impdef=on}
MACHINE=${ARENACTL_ARM64_MACHINE:-virt}
SMP=${ARENACTL_ARM64_SMP:-2}
MEM=${ARENACTL_ARM64_MEM:-2G}
# Seconds from qemu's start to the guest's PID 1 running (13-30 s seen on a
# loaded 2-CPU machine).
BOOT_LIMIT=${ARENACTL_ARM64_BOOT_LIMIT:-240}
PAGES=${ARENACTL_ARM64_PAGES:-4k}
case $PAGES in 4k | 16k) ;; *)
	echo "arm64-vm.sh: ARENACTL_ARM64_PAGES is '$PAGES': 4k or 16k" >&2
	exit 125
	;;
esac
SUITE=bookworm
# Debian 12 has no arm64 kernel with 16 KiB pages; Debian 13's runs its
# userland as well.
SUITE_16K=trixie
KERNEL_PKG_16K=linux-image-arm64-16k
# The kernel is Debian 12's cloud flavour, the metapackage's current version.
KERNEL_PKG=linux-image-cloud-arm64
# Packages on top of minbase: mount (util-linux's mount), procps (ps, for
# targets' and tests' checks). Kept small: no recommends.
INCLUDE=mount,procps

die() {
	echo "arm64-vm.sh: $*" >&2
	exit 125
}

mirror() {
	local u
	u=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
	echo "${u:-http://deb.debian.org/debian}"
}

# missing prints one line per missing tool, with the Debian package giving it.
missing() {
	local t
	for t in qemu-system-aarch64:qemu-system-arm qemu-aarch64-static:qemu-user-static \
		debootstrap:debootstrap aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu \
		aarch64-linux-gnu-g++:g++-aarch64-linux-gnu \
		mkfs.ext4:e2fsprogs tar:tar timeout:coreutils apt-get:apt dpkg-deb:dpkg flock:util-linux; do
		command -v "${t%%:*}" >/dev/null || echo "${t%%:*} (apt-get install --no-install-recommends ${t#*:})"
	done
	[ "$PAGES" = 4k ] || command -v cpio >/dev/null || echo "cpio (apt-get install --no-install-recommends cpio)"
	# The debootstrap second stage runs arm64 programs in a chroot: the
	# kernel must hand them to qemu-user-static.
	if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
		echo "binfmt_misc entry qemu-aarch64 (mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; /usr/lib/systemd/systemd-binfmt /usr/lib/binfmt.d/qemu-aarch64.conf)"
	elif ! grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64; then
		echo "binfmt_misc entry qemu-aarch64 is disabled (echo 1 >/proc/sys/fs/binfmt_misc/qemu-aarch64)"
	fi
}

cmd_check() {
	local m
	m=$(missing)
	if [ -n "$m" ]; then
		echo "missing:"
		echo "$m" | sed 's/^/  /'
		return 1
	fi
	if [ -f "$CACHE/root.img" ] && [ -f "$CACHE/$(kernel_file)" ]; then
		echo "ready: image in $CACHE"
	else
		echo "tools present; no image yet in $CACHE (arm64-vm.sh build)"
	fi
}

# The guest's PID 1. The kernel command line carries arenactl.timeout.
write_init() {
	cat >"$1" <<'EOF'
#!/bin/sh
# PID 1 of arenactl's arm64 VM (scripts/arm64-vm.sh): run one job, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
# The root disk is opened with snapshot=on: writes never reach the image.
mount -o remount,rw /
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
hostname arm64vm
ip link set lo up 2>/dev/null
limit=600
for a in $(cat /proc/cmdline); do
	case $a in arenactl.timeout=*) limit=${a#*=} ;; esac
done
dev() { for d in /sys/class/nvme/nvme*; do [ "$(cat "$d/serial" 2>/dev/null | tr -d ' ')" = "$1" ] && { ls "$d" | grep -m1 "^nvme[0-9]*n1$"; return; }; done; }
job=$(dev job)
if [ -n "$job" ]; then
	out=/dev/$(dev out)
	mkdir -p /job
	# The job disk is a tar archive padded with zeros, read as a file.
	tar -xf "/dev/$job" -C /job
else
	# Booted from an initramfs that holds /job (a kernel without NVMe
	# built in): the results go out through a virtio serial port.
	job=initramfs
	for p in /sys/class/virtio-ports/*; do
		[ "$(cat "$p/name" 2>/dev/null)" = arenactl.out ] && out=/dev/${p##*/}
	done
fi
echo "arenactl-vm: up $(cut -d' ' -f1 /proc/uptime)s, job on $job, results to $out" >/dev/console
mkdir -p /job/out
cd /job
start=$(cut -d' ' -f1 /proc/uptime)
timeout -k 5 "$limit" bash /job/.cmd >/job/.stdout 2>/job/.stderr </dev/null
echo $? >/job/.rc
end=$(cut -d' ' -f1 /proc/uptime)
echo "$start $end" >/job/.times
tar -cf "$out" -C /job .stdout .stderr .rc .times out
sync
sleep 1
echo "arenactl-vm: done $(cut -d' ' -f1 /proc/uptime)s" >/dev/console
echo o >/proc/sysrq-trigger
sleep 10
EOF
	chmod 755 "$1"
}

# kernel_file is the cached kernel of this run's page size.
kernel_file() { if [ "$PAGES" = 16k ]; then echo vmlinuz-16k; else echo vmlinuz; fi; }

# fetch_kernel SUITE METAPACKAGE NAME: the kernel behind METAPACKAGE in
# SUITE's arm64 archive, as $CACHE/NAME (and its config as NAME.config),
# with a private apt state under $CACHE/tmp.
fetch_kernel() {
	local apt=$CACHE/tmp/apt-$1 o img
	echo "kernel ($2, $1)" >&2
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/empty.d" "$CACHE/tmp/kernel-$3"
	: >"$apt/status"
	echo "deb $(mirror) $1 main" >"$apt/sources.list"
	o=(-o APT::Architecture=arm64 -o APT::Architectures=arm64
		-o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts="$apt/empty.d"
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Dir::State::status="$apt/status"
		-o Dir::Etc::preferencesparts="$apt/empty.d" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
	timeout 600 apt-get "${o[@]}" update >"$apt/log" 2>&1 || die "apt-get update ($1 arm64) failed (see $apt/log)"
	img=$(apt-cache "${o[@]}" depends "$2" 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n 1)
	[ -n "$img" ] || die "no kernel package behind $2 in $1"
	(cd "$apt" && timeout 900 apt-get "${o[@]}" download "$img" >>"$apt/log" 2>&1) ||
		die "apt-get download $img failed (see $apt/log)"
	dpkg-deb --fsys-tarfile "$apt/$img"_*.deb | tar -x -C "$CACHE/tmp/kernel-$3" --wildcards './boot/*'
	cp "$CACHE/tmp/kernel-$3"/boot/config-* "$CACHE/$3.config"
	cp "$CACHE/tmp/kernel-$3"/boot/vmlinuz-* "$CACHE/$3.new"
	mv "$CACHE/$3.new" "$CACHE/$3"
	echo "kernel $3: $img" >>"$CACHE/VERSION"
	rm -rf "$apt" "$CACHE/tmp/kernel-$3"
}

cmd_build() {
	local m
	m=$(missing)
	[ -z "$m" ] || die "missing: $(echo "$m" | head -n 1) (arm64-vm.sh check lists all)"
	[ "$(id -u)" = 0 ] || die "build needs root (debootstrap, chroot)"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock -w 3600 9 || die "another build holds $CACHE/.lock"
	if [ ! -d "$CACHE/rootfs" ] || [ ! -f "$CACHE/vmlinuz" ]; then
		build_base
	fi
	if [ "$PAGES" = 16k ] && [ ! -f "$CACHE/vmlinuz-16k" ]; then
		fetch_kernel "$SUITE_16K" "$KERNEL_PKG_16K" vmlinuz-16k
	fi
	rm -rf "$CACHE/tmp"
	make_image
	cat "$CACHE/VERSION"
	echo "image: $(du -sh --apparent-size "$CACHE/root.img" | cut -f1) apparent, $(du -sh "$CACHE/root.img" | cut -f1) on disk" >&2
}

# build_base: the Debian 12 arm64 tree and its cloud kernel.
build_base() {
	local t0 uri tmp rootfs
	t0=$(date +%s)
	uri=$(mirror)
	tmp=$CACHE/tmp
	rm -rf "$tmp" "$CACHE/rootfs" "$CACHE/root.img" "$CACHE/root.cpio" "$CACHE/init.sh"
	mkdir -p "$tmp"
	rootfs=$tmp/rootfs

	echo "debootstrap (first stage) from $uri" >&2
	timeout 1800 debootstrap --arch=arm64 --variant=minbase --foreign \
		--include="$INCLUDE" "$SUITE" "$rootfs" "$uri" >"$tmp/debootstrap1.log" 2>&1 ||
		die "debootstrap's first stage failed (see $tmp/debootstrap1.log)"
	echo "debootstrap (second stage, arm64 under qemu-user-static)" >&2
	cp /usr/bin/qemu-aarch64-static "$rootfs/usr/bin/"
	timeout 3600 chroot "$rootfs" /debootstrap/debootstrap --second-stage >"$tmp/debootstrap2.log" 2>&1 ||
		die "debootstrap's second stage failed (see $tmp/debootstrap2.log)"
	rm -f "$rootfs/usr/bin/qemu-aarch64-static"
	# Smaller: no package cache, lists, documentation or locales.
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
		"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* \
		"$rootfs"/usr/share/info/*
	echo "$SUITE arm64 (arenactl-vm)" >"$rootfs/etc/issue"
	mv "$rootfs" "$CACHE/rootfs"
	{
		echo "suite: $SUITE arm64 minbase + $INCLUDE"
		echo "glibc: $(awk -v RS= '/^Package: libc6\n/' "$CACHE/rootfs/var/lib/dpkg/status" | sed -n 's/^Version: //p')"
	} >"$CACHE/VERSION"
	fetch_kernel "$SUITE" "$KERNEL_PKG" vmlinuz
	echo "built: $(date -u +%FT%TZ) in $(($(date +%s) - t0)) s" >>"$CACHE/VERSION"
}

# make_image (re)makes root.img from rootfs when this script's init differs
# from the image's: seconds, no debootstrap.
make_image() {
	local init=$CACHE/init.sh kib
	write_init "$init.new"
	if [ -f "$CACHE/root.img" ] && cmp -s "$init.new" "$init"; then
		rm -f "$init.new"
	else
		[ -d "$CACHE/rootfs" ] || die "no rootfs in $CACHE (run: arm64-vm.sh build)"
		echo "root.img (ext4)" >&2
		rm -f "$CACHE/root.cpio"
		cp "$init.new" "$CACHE/rootfs/sbin/arenactl-vm-init"
		kib=$(du -sk "$CACHE/rootfs" | cut -f1)
		rm -f "$CACHE/root.img.new"
		truncate -s "$(((kib + 262144) / 1024))M" "$CACHE/root.img.new"
		mkfs.ext4 -q -F -L arenactl-arm64 -d "$CACHE/rootfs" "$CACHE/root.img.new" >/dev/null || die "mkfs.ext4 -d failed"
		mv "$CACHE/root.img.new" "$CACHE/root.img"
		mv "$init.new" "$init"
	fi
	if [ "$PAGES" = 16k ] && [ ! -f "$CACHE/root.cpio" ]; then
		echo "root.cpio (initramfs)" >&2
		(cd "$CACHE/rootfs" && find . | cpio -o -H newc --quiet) >"$CACHE/root.cpio.new" || die "cpio failed"
		mv "$CACHE/root.cpio.new" "$CACHE/root.cpio"
	fi
}

cmd_run() {
	local limit=600 outdir="" OPTIND=1 opt
	while getopts "t:o:" opt; do
		case $opt in
		t) limit=$OPTARG ;;
		o) outdir=$OPTARG ;;
		*) die "usage: arm64-vm.sh run [-t SECONDS] [-o OUTDIR] JOBDIR CMD..." ;;
		esac
	done
	shift $((OPTIND - 1))
	[ $# -ge 2 ] || die "usage: arm64-vm.sh run [-t SECONDS] [-o OUTDIR] JOBDIR CMD..."
	case $limit in '' | *[!0-9]*) die "-t: '$limit' is not a number of seconds" ;; esac
	local jobdir=$1
	shift
	[ -d "$jobdir" ] || die "$jobdir: not a directory"
	[ -d "$CACHE/rootfs" ] && [ -f "$CACHE/$(kernel_file)" ] || die "no image for $PAGES pages in $CACHE (run: ARENACTL_ARM64_PAGES=$PAGES arm64-vm.sh build)"
	[ "$PAGES" = 4k ] || command -v cpio >/dev/null || die "cpio is missing (apt-get install cpio)"
	(
		flock -w 600 9 || die "$CACHE/.lock is held"
		make_image
	) 9>"$CACHE/.lock"
	command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 is missing (apt-get install qemu-system-arm)"

	local w
	w=$(mktemp -d /tmp/arenactl-arm64vm.XXXXXX)
	# The VM goes with the script, however it ends (timeout passes a
	# SIGTERM on to qemu).
	QPID=""
	# shellcheck disable=SC2064 # expand now: w is local
	trap "[ -z \"\$QPID\" ] || kill \$QPID 2>/dev/null || true; rm -rf '$w'" EXIT
	trap 'exit 130' INT TERM HUP
	printf '%s\n' "$*" >"$w/cmd"
	tar -cf "$w/job.tar" -C "$jobdir" . --transform 's#^\./##' 2>/dev/null || tar -cf "$w/job.tar" -C "$jobdir" .
	tar -rf "$w/job.tar" -C "$w" --transform 's#^cmd$#.cmd#' cmd
	# The results disk: sparse, large enough for cores of small targets.
	truncate -s 2G "$w/out.img"
	local machine
	# shellcheck disable=SC2054 # the commas are qemu's
	if [ "$PAGES" = 4k ]; then
		machine=(-kernel "$CACHE/vmlinuz"
			-append "console=ttyAMA0 root=/dev/nvme0n1 ro rootwait init=/sbin/arenactl-vm-init panic=-1 quiet arenactl.timeout=$limit"
			-drive "file=$CACHE/root.img,if=none,id=root,format=raw,snapshot=on" -device nvme,drive=root,serial=root
			-drive "file=$w/job.tar,if=none,id=job,format=raw,readonly=on" -device nvme,drive=job,serial=job
			-drive "file=$w/out.img,if=none,id=out,format=raw" -device nvme,drive=out,serial=out)
	else
		# The initramfs: the root, then the job under /job.
		mkdir -p "$w/stage/job"
		tar -xf "$w/job.tar" -C "$w/stage/job"
		cp "$CACHE/root.cpio" "$w/initrd"
		(cd "$w/stage" && find . | cpio -o -H newc --quiet) >>"$w/initrd"
		rm -rf "$w/stage"
		: >"$w/out.img"
		# shellcheck disable=SC2054
		machine=(-kernel "$CACHE/vmlinuz-16k" -initrd "$w/initrd"
			-append "console=ttyAMA0 rdinit=/sbin/arenactl-vm-init panic=-1 quiet arenactl.timeout=$limit"
			-device virtio-serial-pci -chardev "file,id=out,path=$w/out.img" -device virtserialport,chardev=out,name=arenactl.out)
	fi
	mkdir -p "$CACHE/log"
	# The consoles of the last 20 runs are kept.
	# (Under pipefail: a fresh cache has no log yet, and ls fails.)
	{ ls -1t "$CACHE"/log/run-*.log 2>/dev/null || true; } | tail -n +20 | xargs -r rm -f
	local log
	log=$CACHE/log/run-$(date -u +%Y%m%dT%H%M%S)-$$.log
	local t0 t1 rc=0
	t0=$(date +%s.%N)
	# Boot, the job and power-off, bounded together; qemu's own timeout
	# gives the guest's timeout room to report. The boot alone is bounded
	# too: a guest whose PID 1 has not said it is up within BOOT_LIMIT
	# seconds is stopped.
	timeout -k 10 $((limit + BOOT_LIMIT + 60)) nice qemu-system-aarch64 \
		-M "$MACHINE" -cpu "$CPU" -smp "$SMP" -m "$MEM" -accel tcg,thread=multi \
		-nographic -no-reboot -nodefaults -serial "file:$log" -monitor none "${machine[@]}" \
		</dev/null >"$w/qemu.out" 2>&1 &
	local qpid=$! booted=0
	QPID=$qpid
	for _ in $(seq $((BOOT_LIMIT * 2))); do
		if grep -q 'arenactl-vm: up' "$log" 2>/dev/null; then
			booted=1
			break
		fi
		kill -0 "$qpid" 2>/dev/null || break
		sleep 0.5
	done
	if [ "$booted" = 0 ] && kill -0 "$qpid" 2>/dev/null; then
		kill "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
		QPID=""
		die "the VM did not boot within $BOOT_LIMIT s (console: $log)"
	fi
	wait "$qpid" || rc=$?
	QPID=""
	t1=$(date +%s.%N)
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		die "the VM did not finish within $((limit + BOOT_LIMIT + 60)) s (console: $log)"
	fi
	[ "$rc" = 0 ] || die "qemu-system-aarch64 failed ($rc): $(head -c 300 "$w/qemu.out" | tr '\n' ' ') (console: $log)"
	[ "$booted" = 1 ] || die "the VM did not boot (console: $log)"
	mkdir -p "$w/res"
	tar -xf "$w/out.img" -C "$w/res" 2>/dev/null || true
	[ -f "$w/res/.rc" ] || die "the VM gave no result (did it boot? console: $log)"
	cat "$w/res/.stdout"
	cat "$w/res/.stderr" >&2
	if [ -n "$outdir" ]; then
		mkdir -p "$outdir"
		cp -a "$w/res/out/." "$outdir/"
	fi
	local up
	up=$(grep -o 'arenactl-vm: up [0-9.]*' "$log" | awk '{print $3}')
	read -r s e <"$w/res/.times"
	echo "arm64-vm.sh: $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s in all: booted in ${up:-?} s, command $(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.1f", b-a}') s, exit $(cat "$w/res/.rc")" >&2
	# exit, not return: the command's status is no failure of the script's
	# (the ERR trap), and the EXIT trap cleans up.
	exit "$(cat "$w/res/.rc")"
}

case ${1:-} in
check) cmd_check || exit 1 ;;
build) cmd_build ;;
run)
	shift
	cmd_run "$@"
	;;
path) echo "$CACHE" ;;
*)
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
