package dev.compute.memory.opencl;

import static org.jocl.CL.CL_MEM_READ_WRITE;
import static org.jocl.CL.CL_TRUE;

import dev.compute.memory.internal.StagingMemory;
import dev.compute.memory.spi.FileMappings;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_event;
import org.jocl.cl_mem;
import org.jspecify.annotations.Nullable;

/**
 * The backend's copies. Memory the host can address is copied by the host ({@link MemorySegment#copy}); a DEVICE buffer
 * through {@code clEnqueueWriteBuffer}/{@code clEnqueueReadBuffer} (from a Java array in place when blocking, through a
 * native temporary when queued) and {@code clEnqueueCopyBuffer} between buffers (through a temporary where ranges of
 * one buffer overlap). A queued copy goes on the backend's queue, in order with the rest of its work; a blocking one
 * waits, bounded, for that queue's work so far, then runs on the queue of blocking transfers
 * ({@link OpenClQueue#transferQueue}), where work queued meanwhile on the backend's queue cannot hold it up. Any segment over a mapped file
 * ({@link FileMappings#isOverMapping}: the mapping, and the views and accesses the manager hands out over one), and a
 * read-only heap segment, go through a staging buffer one chunk at a time, copied by Java: the driver never reads or
 * writes a mapping, so a file truncated under it fails the copy with an exception instead of ending the process. The
 * backend checks that it is open and that the ranges are within their allocations before it calls here.
 */
final class OpenClCopies {

    /** The backend's queue, which tracks the queued copies' events. */
    private final OpenClQueue commands;
    private final cl_context context;
    private final cl_command_queue queue;
    /** Where the blocking copies run, once the work queued before them has ended. */
    private final cl_command_queue transfers;
    private final long stagingBytes;

    OpenClCopies(OpenClQueue commands, long stagingBytes) {
        this.commands = commands;
        this.context = commands.context();
        this.queue = commands.commandQueue();
        this.transfers = commands.transferQueue();
        this.stagingBytes = stagingBytes;
    }

    /** A blocking copy to an allocation: by the host where it can address it, else written to the buffer. */
    void toDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        MemorySegment host = target.hostSegment();
        if (host != null) {
            MemorySegment.copy(source, 0, host, targetOffset, bytes);
            return;
        }
        write(OpenClBackend.memObject(target), targetOffset, source.asSlice(0, bytes));
    }

    /** A blocking copy from an allocation: by the host where it can address it, else read from the buffer. */
    void toHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        MemorySegment host = source.hostSegment();
        if (host != null) {
            MemorySegment.copy(host, sourceOffset, target, 0, bytes);
            return;
        }
        read(OpenClBackend.memObject(source), sourceOffset, target.asSlice(0, bytes));
    }

    /** A blocking copy between two allocations: by the host, written, read or copied between buffers, as they are. */
    void withinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        MemorySegment from = source.hostSegment();
        MemorySegment to = target.hostSegment();
        if (from != null && to != null) {
            MemorySegment.copy(from, sourceOffset, to, targetOffset, bytes);
        } else if (from != null) {
            write(OpenClBackend.memObject(target), targetOffset, from.asSlice(sourceOffset, bytes));
        } else if (to != null) {
            read(OpenClBackend.memObject(source), sourceOffset, to.asSlice(targetOffset, bytes));
        } else if (bytes > 0) {
            copyBuffers(OpenClBackend.memObject(source), sourceOffset, OpenClBackend.memObject(target), targetOffset, bytes);
        }
    }

    private void copyBuffers(cl_mem from, long fromOffset, cl_mem to, long toOffset, long bytes) {
        commands.awaitQueuedWork("a clEnqueueCopyBuffer of " + bytes + " bytes waited for");
        boolean overlapping = from.equals(to) && fromOffset < toOffset + bytes && toOffset < fromOffset + bytes;
        if (!overlapping) {
            cl_event done = new cl_event();
            OpenClCalls.check(JoclCalls.clEnqueueCopyBuffer(transfers, from, to, fromOffset, toOffset, bytes, 0, null, done), "clEnqueueCopyBuffer");
            awaitAndRelease(done, "clEnqueueCopyBuffer");
            return;
        }
        // clEnqueueCopyBuffer refuses overlapping ranges of one buffer: go through a temporary buffer
        int[] error = new int[1];
        cl_mem temporary = JoclCalls.clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, null, error);
        OpenClCalls.check(error[0], "clCreateBuffer of a " + bytes + "-byte temporary for an overlapping copy");
        try {
            OpenClCalls.check(JoclCalls.clEnqueueCopyBuffer(transfers, from, temporary, fromOffset, 0, bytes, 0, null, null), "clEnqueueCopyBuffer");
            cl_event done = new cl_event();
            OpenClCalls.check(JoclCalls.clEnqueueCopyBuffer(transfers, temporary, to, 0, toOffset, bytes, 0, null, done), "clEnqueueCopyBuffer");
            awaitAndRelease(done, "clEnqueueCopyBuffer");
        } finally {
            JoclCalls.clReleaseMemObject(temporary);
        }
    }

    /**
     * A copy to an allocation, queued: complete once its command is. A mapped file and host memory are copied before
     * this returns; a Java array is staged in native memory the command owns, since the array may move meanwhile.
     */
    CompletableFuture<Void> toDeviceQueued(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        if (target.hostSegment() != null || bytes == 0) {
            toDevice(source, target, targetOffset, bytes);
            return CompletableFuture.completedFuture(null);
        }
        cl_mem memory = OpenClBackend.memObject(target);
        if (FileMappings.isOverMapping(source)) {
            write(memory, targetOffset, source.asSlice(0, bytes)); // staged by Java, never read by the driver
            return CompletableFuture.completedFuture(null);
        }
        if (source.isNative()) {
            return enqueueWrite(memory, targetOffset, source.address(), bytes, null);
        }
        // a Java array may move while a command reads it: stage it in native memory the command owns
        MemorySegment staging = StagingMemory.allocate(bytes);
        try {
            MemorySegment.copy(source, 0, staging, 0, bytes);
        } catch (RuntimeException | Error e) {
            StagingMemory.free(staging);
            throw e;
        }
        // freed on the thread that sees the command end, before the copy's future completes: no dependent action, which
        // would send that completion to a thread of its own
        return enqueueWrite(memory, targetOffset, staging.address(), bytes, staging).forCaller(failure -> StagingMemory.free(staging));
    }

    /** A copy from an allocation, queued: as {@link #toDeviceQueued}, into a Java array through native memory. */
    CompletableFuture<Void> toHostQueued(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        if (source.hostSegment() != null || bytes == 0) {
            toHost(source, sourceOffset, target, bytes);
            return CompletableFuture.completedFuture(null);
        }
        checkWritable(target);
        cl_mem memory = OpenClBackend.memObject(source);
        if (FileMappings.isOverMapping(target)) {
            read(memory, sourceOffset, target.asSlice(0, bytes)); // staged by Java, never written by the driver
            return CompletableFuture.completedFuture(null);
        }
        if (target.isNative()) {
            return enqueueRead(memory, sourceOffset, target.address(), bytes, null);
        }
        MemorySegment landing = StagingMemory.allocate(bytes);
        return enqueueRead(memory, sourceOffset, landing.address(), bytes, landing).forCaller(failure -> {
            try {
                if (failure == null) {
                    MemorySegment.copy(landing, 0, target, 0, bytes);
                }
            } finally {
                StagingMemory.free(landing);
            }
        });
    }

    /**
     * Queues a write from {@code hostAddress}. {@code staging}, the memory there where it is this copy's own, is freed
     * here where the command could not be queued; once it is queued, a failure after it (the flush) keeps it, since
     * the command may still read it.
     */
    private EventCompletions.EventWork enqueueWrite(cl_mem memory, long offset, long hostAddress, long bytes, @Nullable MemorySegment staging) {
        cl_event done = new cl_event();
        queued(JoclCalls.clEnqueueWriteBuffer(queue, memory, false, offset, bytes, OpenClCalls.pointerAt(hostAddress), 0, null, done),
                "clEnqueueWriteBuffer of " + bytes + " bytes", staging);
        return commands.track(done, "clEnqueueWriteBuffer of " + bytes + " bytes");
    }

    /** Queues a read into {@code hostAddress}; {@code staging} as for {@link #enqueueWrite}. */
    private EventCompletions.EventWork enqueueRead(cl_mem memory, long offset, long hostAddress, long bytes, @Nullable MemorySegment staging) {
        cl_event done = new cl_event();
        queued(JoclCalls.clEnqueueReadBuffer(queue, memory, false, offset, bytes, OpenClCalls.pointerAt(hostAddress), 0, null, done),
                "clEnqueueReadBuffer of " + bytes + " bytes", staging);
        return commands.track(done, "clEnqueueReadBuffer of " + bytes + " bytes");
    }

    private static void queued(int code, String what, @Nullable MemorySegment staging) {
        try {
            OpenClCalls.check(code, what);
        } catch (RuntimeException | Error e) {
            if (staging != null) {
                StagingMemory.free(staging); // not queued: nothing reads or writes it
            }
            throw e;
        }
    }

    /**
     * A blocking write from any segment: a native address, a Java array in place, or staged when it is a read-only
     * heap segment or a mapped file. A mapped file is read by Java, one staging buffer at a time: if the file was
     * truncated under its mapping, the read of the missing bytes fails with an exception there, where the driver
     * reading the mapping itself would end the process.
     */
    private void write(cl_mem memory, long offset, MemorySegment source) {
        long bytes = source.byteSize();
        if (bytes == 0) {
            return;
        }
        commands.awaitQueuedWork("a blocking clEnqueueWriteBuffer of " + bytes + " bytes");
        Pointer from = FileMappings.isOverMapping(source) ? null : hostPointer(source);
        if (from != null) {
            OpenClCalls.check(JoclCalls.clEnqueueWriteBuffer(transfers, memory, CL_TRUE, offset, bytes, from, 0, null, null), "clEnqueueWriteBuffer of " + bytes + " bytes");
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            long chunk = Math.min(bytes, stagingBytes);
            MemorySegment staging = arena.allocate(chunk, 64);
            for (long done = 0; done < bytes; done += chunk) {
                long length = Math.min(chunk, bytes - done);
                MemorySegment.copy(source, done, staging, 0, length);
                FileMappings.surfaceFaults(); // a fault of the copy is thrown here, before the chunk is written
                OpenClCalls.check(JoclCalls.clEnqueueWriteBuffer(transfers, memory, CL_TRUE, offset + done, length, OpenClCalls.pointerAt(staging.address()), 0, null, null),
                        "clEnqueueWriteBuffer of " + length + " bytes");
            }
        }
    }

    /** A blocking read into a native segment or a Java array; into a mapped file staged, as {@link #write} stages one. */
    private void read(cl_mem memory, long offset, MemorySegment target) {
        checkWritable(target);
        long bytes = target.byteSize();
        if (bytes == 0) {
            return;
        }
        commands.awaitQueuedWork("a blocking clEnqueueReadBuffer of " + bytes + " bytes");
        if (FileMappings.isOverMapping(target)) {
            try (Arena arena = Arena.ofConfined()) {
                long chunk = Math.min(bytes, stagingBytes);
                MemorySegment staging = arena.allocate(chunk, 64);
                for (long done = 0; done < bytes; done += chunk) {
                    long length = Math.min(chunk, bytes - done);
                    OpenClCalls.check(JoclCalls.clEnqueueReadBuffer(transfers, memory, CL_TRUE, offset + done, length, OpenClCalls.pointerAt(staging.address()), 0, null, null),
                            "clEnqueueReadBuffer of " + length + " bytes");
                    MemorySegment.copy(staging, 0, target, done, length);
                    FileMappings.surfaceFaults();
                }
            }
            return;
        }
        Pointer to = hostPointer(target);
        if (to == null) {
            throw new IllegalArgumentException("cannot read into a segment that is neither native nor backed by a Java array: " + target);
        }
        OpenClCalls.check(JoclCalls.clEnqueueReadBuffer(transfers, memory, CL_TRUE, offset, bytes, to, 0, null, null), "clEnqueueReadBuffer of " + bytes + " bytes");
    }

    /**
     * Where a blocking command may read or write a segment: its native address, or its Java array at the
     * segment's offset (JOCL pins the array for the call); null for a read-only heap segment, which hides its array.
     */
    private static @Nullable Pointer hostPointer(MemorySegment segment) {
        if (segment.isNative()) {
            return OpenClCalls.pointerAt(segment.address());
        }
        Object base = segment.heapBase().orElse(null);
        Pointer array = switch (base) {
            case byte[] a -> Pointer.to(a);
            case short[] a -> Pointer.to(a);
            case char[] a -> Pointer.to(a);
            case int[] a -> Pointer.to(a);
            case long[] a -> Pointer.to(a);
            case float[] a -> Pointer.to(a);
            case double[] a -> Pointer.to(a);
            case null, default -> null;
        };
        // a heap segment's address is its byte offset into the array
        return array == null ? null : array.withByteOffset(segment.address());
    }

    private static void checkWritable(MemorySegment target) {
        if (target.isReadOnly()) {
            throw new IllegalArgumentException("cannot copy into a read-only segment");
        }
    }

    private static void awaitAndRelease(cl_event event, String what) {
        try {
            OpenClCalls.check(JoclCalls.clWaitForEvents(1, new cl_event[] {event}), what);
        } finally {
            JoclCalls.clReleaseEvent(event);
        }
    }
}
