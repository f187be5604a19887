#!/bin/sh
# hack/dpdk-image.sh OUT TAG ENTRYPOINT: builds the DPDK image (`make image-dpdk`) from the node's
# Debian DPDK packages, the way `make image` builds the memifnet image (hack/image, no container
# engine, no registry): dpdk-testpmd (package dpdk-dev), the closure of its shared libraries and
# of the PMDs it needs from the plugin directory (net_memif from librte-net-memif23, the ring
# mempool driver), the dynamic loader, and ENTRYPOINT (hack/memif-testpmd) at
# /usr/local/bin/memif-testpmd. Every file keeps its path, mode and symlinks (testpmd finds the
# PMDs linked into it by its RUNPATH, EAL loads every driver in the plugin directory), so the
# image runs testpmd as the node does. About 20 MB.
set -eu
out=$1 tag=$2 entry=$3
testpmd=$(command -v dpdk-testpmd) || { echo "dpdk-image: no dpdk-testpmd (apt-get install dpdk-dev)" >&2; exit 1; }
memif=$(dpkg -L librte-net-memif23 | grep '/librte_net_memif\.so\.[0-9.]*$' | sort | tail -1)
pmds=$(dirname "$memif")
ring=$(ls "$pmds"/librte_mempool_ring.so.*.* | tail -1)
stage=$(mktemp -d "${TMPDIR:-/tmp}/dpdk-image.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# copy PATH into the stage at its real directory, keeping a symlink as a link and copying what
# it points to as well
copy() {
	d=$(realpath "$(dirname "$1")") f=$d/$(basename "$1")
	mkdir -p "$stage$d"
	cp -P --preserve=mode "$f" "$stage$f"
	if [ -L "$f" ]; then
		copy "$(realpath "$f")"
	fi
}
for top in /lib /lib64 /bin /sbin; do
	[ -L "$top" ] && cp -P "$top" "$stage$top"
done
for obj in "$testpmd" "$memif" "$ring"; do
	copy "$obj"
	# ldd's lines: "name => /path (addr)" or "/path (addr)" (the loader)
	for lib in $(ldd "$obj" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p'); do
		copy "$lib"
	done
done
# glibc dlopens libgcc_s for pthread_cancel (EAL's exit path); ldd does not list it
libc=$(ldd "$testpmd" | sed -n 's/.*libc\.so\.6 => \([^ ]*\) .*/\1/p')
copy "$(dirname "$libc")/libgcc_s.so.1"
mkdir -p "$stage/usr/local/bin"
cp "$entry" "$stage/usr/local/bin/memif-testpmd"
chmod 0755 "$stage/usr/local/bin/memif-testpmd"
${GO:-go} run ./hack/image -o "$out" -t "$tag" -entrypoint /usr/local/bin/memif-testpmd -root "$stage"
echo "$out: $tag ($(du -sh "$stage" | cut -f1) staged: $(find "$stage" -type f | wc -l) files)"
