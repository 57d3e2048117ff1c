#!/bin/busybox sh
# /init of the kernel-matrix VM (stage 1, busybox). Loads the modules, mounts the host's root
# (shared read-only over 9p) under a tmpfs overlay, and switches to it, so the guest runs the very
# binaries the host built and the host's own tools (ip, nft, dnsmasq, nginx, ...), with no copying.
/bin/busybox mkdir -p /proc /sys /dev /bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules/order); do
  insmod "/modules/$m.ko" || echo "KM-MODULE-FAILED $m"
done
mkdir -p /host /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /host || echo "KM-FATAL 9p mount failed"
mount -t tmpfs tmpfs /upper
mkdir -p /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/upper/data,workdir=/upper/work /newroot \
  || echo "KM-FATAL overlay mount failed"
mkdir -p /newroot/.km && cp /bin/busybox /newroot/.km/busybox
cp /stage2.sh /newroot/.km/stage2.sh
exec switch_root /newroot /bin/sh /.km/stage2.sh
