package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuStreamCreate;
import static dev.compute.memory.cuda.DriverCalls.cuStreamDestroy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import java.util.function.Supplier;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import org.jspecify.annotations.Nullable;

/**
 * The few non-blocking streams the backend's threads work on, picked by thread id, so that one thread's copies and
 * kernels run in the order it issued them while other threads' work overlaps; the ordering of a stream after work on
 * another; and whether the backend is still open. Work is recorded on a stream only under the lifecycle's read lock,
 * and close takes the write lock before anything else, so nothing is recorded on the streams once close has begun to
 * wait for them and destroy them.
 */
final class CudaStreams {

    private final CudaContext context;
    private final DeviceCompletions completions;
    private final AtomicReferenceArray<CUstream> streams;
    private volatile boolean closed;
    /**
     * Set first thing in the backend's close: after it no call starts under {@link #lifecycle}'s read lock, and close
     * then takes the write lock, bounded, to know that the calls under way have ended before it destroys what they use.
     */
    private volatile boolean closing;
    private final ReadWriteLock lifecycle = new ReentrantReadWriteLock();
    /**
     * The frees' side of the lifecycle: device work's callbacks give memory back while close waits for that work, so a
     * free is refused only once {@link #closed}, not once closing; close then takes the write lock, bounded, before it
     * releases the context, so that no free reaches the driver after the context's reset unmapped the memory.
     */
    private final ReadWriteLock freeing = new ReentrantReadWriteLock();
    /** Device handles open now: their holders may queue work of their own on these streams, on memory of the context. */
    private final AtomicInteger openHandles = new AtomicInteger();

    CudaStreams(CudaContext context, DeviceCompletions completions, int count) {
        this.context = context;
        this.completions = completions;
        this.streams = new AtomicReferenceArray<>(count);
    }

    /**
     * Checks the backend is open and its context not lost, makes the context current and returns this thread's stream,
     * made on first use.
     */
    CUstream enter() {
        requireOpen();
        context.requireUsable();
        context.makeCurrent();
        int index = index(Thread.currentThread());
        CUstream stream = streams.get(index);
        return stream != null ? stream : create(index);
    }

    /** Which of the streams a thread works on. */
    int index(Thread thread) {
        return (int) Math.floorMod(thread.threadId(), (long) streams.length());
    }

    private synchronized CUstream create(int index) {
        CUstream existing = streams.get(index);
        if (existing != null) {
            return existing;
        }
        context.makeCurrent(); // after the wait for this monitor
        CUstream stream = new CUstream();
        CudaResults.check(cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        streams.set(index, stream);
        return stream;
    }

    void requireOpen() {
        if (closed) {
            throw new IllegalStateException("this CUDA backend (device " + context.ordinal + ") is closed");
        }
    }

    /**
     * Orders this thread's stream after {@code work} on the device: nothing to do for work of the same stream, else
     * {@code cuStreamWaitEvent} on the event recorded behind it. False for futures the backend did not make, which
     * the caller waits for on the host.
     */
    boolean orderAfter(CompletableFuture<?> work) {
        if (work.isDone()) {
            return true;
        }
        if (!(work instanceof DeviceCompletions.StreamWork<?> onStream)) {
            return false;
        }
        if (onStream.isOn(streams.get(index(Thread.currentThread())))) {
            return true; // this thread's stream runs it in order: no driver call, not even the context's
        }
        Lock read = lifecycle.readLock();
        read.lock();
        try {
            // once closing, the caller waits on the host (bounded) rather than touch a stream close may destroy
            return !closing && onStream.orderStream(enter(), context);
        } finally {
            read.unlock();
        }
    }

    /** Work on one stream completes in the order it was queued. */
    static boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return later instanceof DeviceCompletions.StreamWork<?> a && earlier instanceof DeviceCompletions.StreamWork<?> b && a.sameStream(b);
    }

    /** Makes the context current again on the calling thread, after a wait ({@link CudaContext#makeCurrent}). */
    void makeCurrent() {
        context.makeCurrent();
    }

    /** Makes {@code waiting} wait on the device for the work queued on {@code on} so far; false once closing. */
    boolean orderStreamWhileOpen(CUstream waiting, CUstream on) {
        Lock read = lifecycle.readLock();
        read.lock();
        try {
            if (closing) {
                return false;
            }
            context.makeCurrent();
            completions.makeWait(waiting, on);
            return true;
        } finally {
            read.unlock();
        }
    }

    /**
     * A future for the work queued on {@code stream} so far, from an event recorded on the calling thread (the
     * context made current); {@code null} once the backend is closing, when its streams and events are being
     * destroyed. The close waits for a record under way.
     */
    @Nullable CompletableFuture<Void> recordWhileOpen(CUstream stream) {
        Lock read = lifecycle.readLock();
        read.lock();
        try {
            if (closing) {
                return null;
            }
            context.makeCurrent();
            return completions.record(stream);
        } finally {
            read.unlock();
        }
    }

    /**
     * As {@link #recordWhileOpen}, for one of these streams: a position ({@link DeviceCompletions#position}), no driver
     * call; {@code null} once the backend is closing.
     */
    @Nullable CompletableFuture<Void> positionWhileOpen(CUstream stream) {
        Lock read = lifecycle.readLock();
        read.lock();
        try {
            return closing ? null : completions.position(stream);
        } finally {
            read.unlock();
        }
    }

    /**
     * Runs {@code work} under the lifecycle's read lock, so that close does not begin under it; refused with an
     * {@link IllegalStateException} once close has begun, and with a {@link CudaContextLostException} once a call found
     * the context lost (a sticky error), which {@code work} throwing one records.
     */
    <T> T whileOpen(Supplier<T> work) {
        Lock read = lifecycle.readLock();
        read.lock();
        try {
            if (closing) {
                throw new IllegalStateException("this CUDA backend (device " + context.ordinal + ") is closed");
            }
            context.requireUsable();
            return work.get();
        } catch (CudaContextLostException e) {
            context.lost(e);
            throw e;
        } finally {
            read.unlock();
        }
    }

    /**
     * Runs {@code free} under the frees' read lock, so that close does not release the context under it; refused with
     * an {@link IllegalStateException} once the backend is closed.
     */
    void whileNotClosed(Runnable free) {
        Lock read = freeing.readLock();
        read.lock();
        try {
            requireOpen();
            free.run();
        } finally {
            read.unlock();
        }
    }

    /**
     * This thread's stream for a device handle opening now, counted open until {@link #handleEnded}: close keeps the
     * streams and the context while any is ({@link #openHandles}). Refused once close has begun.
     */
    CUstream openHandle() {
        return whileOpen(() -> {
            CUstream stream = enter();
            openHandles.incrementAndGet();
            return stream;
        });
    }

    void handleEnded() {
        openHandles.decrementAndGet();
    }

    /** Device handles open now; none opens once close has waited for the calls under way. */
    int openHandles() {
        return openHandles.get();
    }

    /**
     * Queues a launch on {@code stream} (the launch's device accesses' stream: the calling thread's), or on the calling
     * thread's stream where the launch has no buffer, with the context current; the future completes when the device has
     * run it. Under the lifecycle's read lock, so close never unloads a kernel under a launch.
     */
    CompletableFuture<Void> launch(@Nullable CUstream stream, Consumer<CUstream> enqueue) {
        return whileOpen(() -> {
            CUstream own = enter();
            CUstream on = stream != null ? stream : own;
            enqueue.accept(on);
            return completions.position(on);
        });
    }

    /**
     * Records an event on every stream made so far and waits, at most {@code timeout}, until all have completed, and
     * the work recorded on the users' own streams ({@link CudaDeviceHandle#recordWork}) too; false when the time ran out
     * first (or the thread was interrupted); true on a lost context, where nothing runs any more. Never an unbounded
     * synchronize: the events complete through {@link DeviceCompletions}, which reports each stream's events in the order
     * they were recorded. A stream of one's own gets no event of ours (it may be destroyed by now): its recorded work is
     * waited for as it is.
     */
    boolean awaitIdle(Duration timeout) {
        List<CompletableFuture<?>> queued;
        try {
            queued = whileOpen(() -> {
                context.makeCurrent();
                // each stream's events are reported in order, but every stream on its own: the backend's streams' new
                // events say nothing of work recorded on another stream
                List<CompletableFuture<?>> recorded = completions.unreported();
                for (int i = 0; i < streams.length(); i++) {
                    CUstream stream = streams.get(i);
                    if (stream != null) {
                        context.makeCurrent(); // a record may wait for the completions' monitor
                        recorded.add(completions.record(stream));
                    }
                }
                return recorded;
            });
        } catch (CudaContextLostException e) { // as a loss the wait finds below: nothing on the device runs any more
            return true;
        }
        if (queued.isEmpty()) {
            return true;
        }
        try {
            CompletableFuture.allOf(queued.toArray(CompletableFuture[]::new)).get(nanos(timeout), TimeUnit.NANOSECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException e) {
            // the device reported an error (a sticky one stops the context): nothing on it runs any more, and the
            // error comes back from the next call that needs the device
            return true;
        }
    }

    private static long nanos(Duration timeout) {
        try {
            return Math.max(0, timeout.toNanos());
        } catch (ArithmeticException beyondLong) {
            return Long.MAX_VALUE;
        }
    }

    /** Begins the close: from now on no call starts and nothing is recorded on the streams. False where it had begun already. */
    synchronized boolean beginClose() {
        if (closing) {
            return false;
        }
        closing = true;
        return true;
    }

    /**
     * Waits, at most {@code wait}, until the calls that began before {@link #beginClose} (copies, ops, launches, records)
     * have ended: true when they have, and then none uses the streams, staging buffers or kernels any more.
     */
    boolean awaitCallsEnded(Duration wait) {
        return awaitReadersEnded(lifecycle, wait);
    }

    /**
     * Waits, at most {@code wait}, until the frees that began before {@link #markClosed} have ended: true when they
     * have, and then none reaches the driver any more.
     */
    boolean awaitFreesEnded(Duration wait) {
        return awaitReadersEnded(freeing, wait);
    }

    /** Waits through interrupts (a close on an interrupted thread must not keep everything for good), put back after. */
    private static boolean awaitReadersEnded(ReadWriteLock lock, Duration wait) {
        Lock write = lock.writeLock();
        long deadline = System.nanoTime() + Math.min(nanos(wait), Long.MAX_VALUE / 4);
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    if (!write.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                        return false;
                    }
                    write.unlock();
                    return true;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Marks the backend closed, once close has waited for the recorded work: every entry point refuses from now on. */
    void markClosed() {
        closed = true;
    }

    /** Destroys every stream made; the close has waited for the work recorded on them. */
    void destroy() {
        for (int i = 0; i < streams.length(); i++) {
            CUstream stream = streams.get(i);
            if (stream != null) {
                cuStreamDestroy(stream);
            }
        }
    }
}
