//! The user buffers of the send or receive syscall the current task is in, for the socket
//! tracepoints of the `tracepoint` DNS tier (`sock_send_length.rs`, `sock_recv_length.rs`): those
//! fire inside the syscall and give the socket and the byte count, not the bytes. The syscall's
//! registers (`bpf_task_pt_regs`, Linux 5.15+) say which call it is and where its buffers are; the
//! register and syscall numbering is the architecture's (`HookOffsets`, `SyscallNumbers`, set by
//! userspace). `msghdr`, `mmsghdr` and `iovec` have one layout on every 64-bit Linux.
//!
//! Read: `sendto`/`recvfrom`, `write`/`read`, `sendmsg`/`recvmsg` and `writev`/`readv` (their
//! first segment), and the first `MAX_MMSG` messages of `sendmmsg`/`recvmmsg` (the glibc A+AAAA
//! pair is two). Not seen: `io_uring` and other calls that carry no buffer in the registers.
use aya_ebpf::{
    helpers::{bpf_get_current_task_btf, bpf_probe_read_user, bpf_task_pt_regs},
    macros::map,
    maps::PerCpuArray,
};
use tracer_common::counter;

use crate::{
    maps::count,
    maps_dns::{hook_offsets, syscalls},
    sock_fields::{as_number, read},
};

/// Messages of one `sendmmsg`/`recvmmsg` read at most.
pub const MAX_MMSG: usize = 4;
/// `struct mmsghdr`: a `msghdr` (56 bytes) and `msg_len`, padded to 64.
const MMSGHDR_SIZE: u64 = 64;
/// `struct msghdr`: `msg_name` at 0, `msg_iov` at 16, `msg_iovlen` at 24.
const MSG_NAME: u64 = 0;
const MSG_IOV: u64 = 16;
const MSG_IOVLEN: u64 = 24;

/// One buffer of the call: where its bytes are, how many, and the address it names (`msg_name`,
/// `sendto`'s destination; 0 when none). All user addresses.
#[derive(Clone, Copy, Default)]
pub struct Buffer {
    pub data: u64,
    pub len: u64,
    pub name: u64,
}

/// Where the hooks collect the buffers of the call: off the 512-byte stack, which the DNS query
/// being built beside them needs.
#[map]
static BUFFERS: PerCpuArray<Buffers> = PerCpuArray::with_max_entries(1, 0);

/// The buffers of the current call, at most `MAX_MMSG`.
#[derive(Default)]
pub struct Buffers {
    pub items: [Buffer; MAX_MMSG],
    pub count: usize,
}

impl Buffers {
    fn push(&mut self, buffer: Buffer) {
        if let Some(slot) = self.items.get_mut(self.count) {
            *slot = buffer;
            self.count += 1;
        }
    }
}

/// A user value; `None` when it cannot be read (not paged in, a bad address).
pub fn user<T>(address: u64) -> Option<T> {
    // SAFETY: bpf_probe_read_user tolerates any address and fails cleanly.
    unsafe { bpf_probe_read_user(address as *const T) }.ok()
}

/// The buffers of the syscall the current task is in, if it is one of the calls above.
pub fn current() -> Option<&'static Buffers> {
    let off = hook_offsets();
    let nr = syscalls();
    // SAFETY: helpers without preconditions; the task is the current one, its registers are the
    // ones its syscall entered with.
    let regs = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) };
    let regs = as_number(regs.cast_unsigned());
    if regs == 0 {
        return None;
    }
    let arg = |n: usize| -> u64 { read(regs + u64::from(off.syscall_args[n])) };
    let call: i32 = read(regs + u64::from(off.syscall_nr));
    let buffers = BUFFERS.get_ptr_mut(0)?;
    // SAFETY: this CPU's slot, this program's alone while it runs here.
    let buffers = unsafe { &mut *buffers };
    buffers.count = 0;
    if call == nr.sendto || call == nr.recvfrom || call == nr.write || call == nr.read {
        let name = if call == nr.sendto { arg(4) } else { 0 };
        buffers.push(Buffer {
            data: arg(1),
            len: arg(2),
            name,
        });
    } else if call == nr.sendmsg || call == nr.recvmsg {
        buffers.push(message(arg(1))?);
    } else if call == nr.writev || call == nr.readv {
        if arg(2) >= 1 {
            buffers.push(first_segment(arg(1), 0)?);
        }
    } else if call == nr.sendmmsg || call == nr.recvmmsg {
        let vlen = arg(2);
        if vlen > MAX_MMSG as u64 {
            count(counter::DNS_MMSG_BEYOND);
        }
        let first = arg(1);
        for i in 0..MAX_MMSG {
            if i as u64 >= vlen {
                break;
            }
            if let Some(buffer) = message(first + i as u64 * MMSGHDR_SIZE) {
                buffers.push(buffer);
            }
        }
    } else {
        return None;
    }
    Some(buffers)
}

/// The first segment of a `msghdr`'s data, with its name.
fn message(msghdr: u64) -> Option<Buffer> {
    let iovlen: u64 = user(msghdr + MSG_IOVLEN)?;
    if iovlen == 0 {
        return None;
    }
    first_segment(user(msghdr + MSG_IOV)?, user(msghdr + MSG_NAME)?)
}

/// `iov[0]` of an `iovec` array.
fn first_segment(iov: u64, name: u64) -> Option<Buffer> {
    let segment: [u64; 2] = user(iov)?;
    Some(Buffer {
        data: segment[0],
        len: segment[1],
        name,
    })
}
