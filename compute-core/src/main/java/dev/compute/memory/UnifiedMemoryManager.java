package dev.compute.memory;

import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import dev.compute.memory.spi.NativeDevice;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Pooled compute memory on one device of one backend. Any thread may allocate, and any thread may close a
 * buffer. Build one with {@link #builder()}; in a Spring Boot application the starter builds it from
 * {@code compute.*} properties.
 *
 * <p>One allocation: {@code allocate(FLOAT32, n, DEVICE)} → the DEVICE resource chain → the caching pool (a
 * free cached block, split to size) → on a miss the backend (a segment, or pages mapped into a reserved range)
 * → when the backend is out of memory the pool releases its cache and retries once → else
 * {@link DeviceOutOfMemoryException}.
 */
public interface UnifiedMemoryManager extends AutoCloseable {

    static UnifiedMemoryManagerBuilder builder() {
        return new UnifiedMemoryManagerBuilder();
    }

    /** {@code bytes} bytes at the default location. */
    default UnifiedBuffer allocate(long bytes) {
        return allocate(bytes, defaultLocation());
    }

    UnifiedBuffer allocate(long bytes, MemoryLocation location);

    /** {@code count} elements of {@code type} at the default location. */
    default UnifiedBuffer allocate(DataType type, long count) {
        return allocate(type, count, defaultLocation());
    }

    UnifiedBuffer allocate(DataType type, long count, MemoryLocation location);

    /** As {@link #allocate(long)}, but empty where there is no memory for it (bad arguments still throw). */
    default Optional<UnifiedBuffer> tryAllocate(long bytes) {
        return tryAllocate(bytes, defaultLocation());
    }

    /**
     * As {@link #allocate(long, MemoryLocation)}, but empty where it would throw {@link DeviceOutOfMemoryException}
     * (after the same recovery: the pool's cache released, its location compacted where {@code compact-on-out-of-memory}
     * is on, the out-of-memory handlers asked, and the failure told to the event listeners). Bad arguments and a closed manager still throw.
     */
    default Optional<UnifiedBuffer> tryAllocate(long bytes, MemoryLocation location) {
        try {
            return Optional.of(allocate(bytes, location));
        } catch (DeviceOutOfMemoryException e) {
            return Optional.empty();
        }
    }

    /** As {@link #allocate(DataType, long)}, but empty where there is no memory for it (bad arguments still throw). */
    default Optional<UnifiedBuffer> tryAllocate(DataType type, long count) {
        return tryAllocate(type, count, defaultLocation());
    }

    /** As {@link #allocate(DataType, long, MemoryLocation)}, but empty where there is no memory for it (see {@link #tryAllocate(long, MemoryLocation)}). */
    default Optional<UnifiedBuffer> tryAllocate(DataType type, long count, MemoryLocation location) {
        try {
            return Optional.of(allocate(type, count, location));
        } catch (DeviceOutOfMemoryException e) {
            return Optional.empty();
        }
    }

    /** {@link #allocateAsync(long, MemoryLocation, Duration)} at the default location. */
    default CompletableFuture<UnifiedBuffer> allocateAsync(long bytes, Duration timeout) {
        return allocateAsync(bytes, defaultLocation(), timeout);
    }

    /**
     * {@code bytes} bytes at {@code location}, now or when buffers closed through this manager give the memory back,
     * within {@code timeout}. The call returns at once: on the caller's thread the request takes only what is there
     * (it waits for no device work, trim or compaction and asks no {@link OutOfMemoryHandler}), and the future
     * completes at once when there is memory and no earlier request waits at that location; otherwise the request
     * joins the location's queue, and each close of a buffer there (or the end of device work a closed buffer's memory
     * waited on) retries the queue from its head, on the manager's waiter thread (never on the closing thread), whose
     * attempts may wait for device work and ask the handlers. Waiting requests are served in the
     * order they came: one that would fit is not served before an earlier one that does not (no barging), so a stream
     * of small requests cannot starve a large one. Plain {@link #allocate} and {@link #tryAllocate} calls do not
     * queue: they take what is there.
     *
     * <p>The future fails with the {@link DeviceOutOfMemoryException} of the last attempt (its reason kept, the wait
     * said in its message) when the timeout passes, at once when the request is larger than the location's cap or
     * the timeout is zero (nothing is waited for then), and with an {@link IllegalStateException} when the manager closes; with what an
     * {@link OutOfMemoryHandler} throws (on the waiter thread). Cancelling it takes the
     * request off the queue; a buffer that comes as it is cancelled or times out is closed, not lost. What a trim or
     * another process frees wakes nobody; the next close does. Functions added to the future without {@code Async}
     * run on the thread that completes it (the waiter thread): keep them short. Waits and timeouts are counted in
     * {@link #statistics(MemoryLocation)}.
     *
     * @throws IllegalArgumentException for a size that is not positive, a negative timeout or a location this
     *                                  manager does not have
     * @throws IllegalStateException    when the manager is closed
     */
    CompletableFuture<UnifiedBuffer> allocateAsync(long bytes, MemoryLocation location, Duration timeout);

    /** {@link #allocateAsync(DataType, long, MemoryLocation, Duration)} at the default location. */
    default CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, Duration timeout) {
        return allocateAsync(type, count, defaultLocation(), timeout);
    }

    /** {@code count} elements of {@code type}, as {@link #allocateAsync(long, MemoryLocation, Duration)} waits for them. */
    CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, MemoryLocation location, Duration timeout);

    /** {@link #allocateBatch(DataType, long[], MemoryLocation)} at the default location. */
    default List<UnifiedBuffer> allocateBatch(DataType type, long[] counts) {
        return allocateBatch(type, counts, defaultLocation());
    }

    /**
     * One buffer of {@code counts[i]} elements of {@code type} for each {@code i}, in that order, all or none: when
     * one cannot be had, those allocated before it are given back and the {@link DeviceOutOfMemoryException} says
     * which one failed. A batch whose buffers together pass the location's cap (counted in the whole pieces the pool
     * takes memory in) fails at once, nothing taken, with an {@link AllocationAboveLimitException}, as a single request
     * above it does. The buffers are independent: each is
     * closed on its own, and its memory goes back alone.
     *
     * <p>Placed together where the pool can: when the location's pool holds a free region large enough for the
     * batch (memory freed earlier, or a warm-up), the small buffers (up to 1 MiB each) are carved one after another
     * from one region of its small arena and the larger ones from one region of its large arena, in one pass under
     * the pool's lock, with no backend call. Where it holds none, or resource adaptors or out-of-memory handlers
     * stand between the manager and the pool, each buffer is placed as a single allocation would be.
     *
     * @throws IllegalArgumentException for an empty batch, a count that is not positive or a location this manager
     *                                  does not have
     */
    List<UnifiedBuffer> allocateBatch(DataType type, long[] counts, MemoryLocation location);

    /**
     * All of {@code file} as a buffer of {@code type} elements, without reading it: see
     * {@link #mapFile(Path, DataType, FileMapMode, long, long)}. The file's size must be a positive whole number of
     * elements.
     */
    UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode) throws IOException;

    /**
     * Bytes {@code [byteOffset, byteOffset + byteLength)} of {@code file} as a HOST buffer of {@code type} elements,
     * without reading them: the buffer's memory is the file, mapped into the process, which the operating system
     * pages in as it is read and out again under memory pressure, so a file larger than the machine's memory works.
     * {@code byteOffset} is a multiple of the element size (elements are then aligned in memory), {@code byteLength}
     * a whole number of elements, and the range lies within the file: a mapping never extends a file.
     *
     * <p><b>As any buffer.</b> It is host memory on every backend (one copy: views and host accesses are the file's
     * bytes, syncs do nothing), and it follows the lifetime rule: {@code close()} makes it unusable at once, and the
     * file is unmapped when the last view, access, copy or op that holds it has ended and device work queued on it
     * has finished; a buffer found garbage-collected without {@code close()} is reported as a leak (at {@code simple}
     * every one, not a sample) and unmapped the same way; closing the manager reports those left open and unmaps them
     * after the same waits as its pools. Ops, slices, copies and accesses work as on a HOST buffer of the backend.
     *
     * <p><b>Onto a device.</b> {@code deviceBuffer.copyFrom(mapped)} streams the file to the device through the
     * backend's staging buffers, in chunks of {@code compute.memory.pinning.staging-buffer-size}, as any copy from
     * host memory: the file is read once, and never held whole in host memory on the way.
     *
     * <p><b>{@link FileMapMode#READ_ONLY}.</b> Every write is refused with an {@link UnsupportedOperationException}
     * before it touches the memory: copies into the buffer, ops that write it, writing accesses and
     * {@link UnifiedBuffer#hostView()} ({@link UnifiedBuffer#readOnlyHostView()} reads it).
     *
     * <p><b>The figures.</b> A mapped file is no pooled memory: {@link #statistics(MemoryLocation)} leaves it out, and
     * {@link #mappedFileStatistics()} counts it; {@link #liveBuffers()} lists it, with its file. At most
     * {@code compute.memory.mapped-files.max-open} files are mapped at once (each is an entry in the process's memory
     * map, of which a process may have few); beyond it this throws {@link IllegalStateException}.
     *
     * <p><b>A file truncated while mapped.</b> Its bytes past the new end are gone, and touching them is a fault
     * ({@code SIGBUS}). Where Java touches them (copies to and from the buffer, the CPU backend's ops, the staged
     * copies of the OpenCL and CUDA backends) the call fails with {@link MappedFileTruncatedException}, and one's own
     * Java code reading a view gets the JVM's {@link InternalError}. Native code that reads the mapping itself ends the
     * process: the OpenCL backend's kernels on this buffer, the CUDA driver when pinning is off, one's own native code
     * given its address. Do not truncate or rewrite a mapped file in place: write a new file and rename it over the old
     * one, which leaves the mapped one whole until it is unmapped.
     *
     * @throws IOException the file cannot be opened in this mode or mapped ({@code NoSuchFileException},
     *     {@code AccessDeniedException}, ...)
     * @throws IllegalArgumentException the range or element type does not fit the file, or it is no regular file
     * @throws IllegalStateException the manager is closed, or {@code compute.memory.mapped-files.max-open} files are mapped
     */
    UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode, long byteOffset, long byteLength) throws IOException;

    /** Where {@link #allocate(long)} puts memory: configured, or DEVICE on an accelerator and HOST on the CPU. */
    MemoryLocation defaultLocation();

    /** The locations this manager can allocate at (the backend's, less PINNED when pinning is disabled). */
    List<MemoryLocation> locations();

    BackendInfo backendInfo();

    /** The settings this manager runs with, as resolved at start (defaults filled in, the backend {@code auto} chose). */
    ManagerSettings settings();

    DeviceMemoryInfo deviceMemory();

    /**
     * This location's figures, exact and current; reading them changes nothing in the pool (no cached block is
     * flushed, nothing is waited for). After {@link #close()} they say what is left: nothing once the close freed
     * everything, else what it kept.
     */
    MemoryStatistics statistics(MemoryLocation location);

    /** Statistics for every location in {@link #locations()}, in that order. */
    Map<MemoryLocation, MemoryStatistics> statistics();

    /** The files mapped by {@link #mapFile}, counted apart from the pools; exact and current, also after {@link #close()}. */
    MappedFileStatistics mappedFileStatistics();

    /**
     * This location's segments and blocks now (blocks cached for quick reuse show as free); taking it changes
     * nothing in the pool. After {@link #close()}, what the close kept, or nothing.
     */
    MemorySnapshot snapshot(MemoryLocation location);

    /** Reserved, allocated and cached bytes over time, sampled into a bounded ring buffer, oldest first. */
    List<MemoryTimeline.Sample> timeline(MemoryLocation location);

    /** Gives cached memory beyond the release threshold back to the backend, at every location; returns the bytes released. */
    long trim();

    /** Gives all cached memory back (as trim, with a threshold of zero); returns the bytes released. */
    long releaseCachedMemory();

    /**
     * Defragments a location's pool: moves the memory of buffers that nothing holds now (no op or copy under way, no
     * view or access open, no device work in flight) into free memory the pool holds, towards its fullest segments and
     * lowest addresses, so that free space coalesces and emptied segments and pages can be given back; then trims as
     * {@link #trim()} does. A moved buffer's handle stays valid: its next use finds the new place. Buffers of up to
     * 1 MiB are not moved (they live on the pool's fast path), nor mapped files, nor held buffers (counted in
     * {@link CompactionReport#buffersInUse()}). A move never raises what the pool reserves (it maps pages for a new
     * place only where it frees more at the old one, and gives those back at once), and each copy runs within
     * the device while the moved buffer waits for it; allocations of large blocks wait too. Does nothing but report
     * where pooling is off. It moves nothing and only trims where the application's resource adaptors are in the
     * chain (one may key blocks by their place), and when called from an out-of-memory handler or a listener while a
     * host view or access of a device buffer allocates its host mirror (under that buffer's lock, which a move takes).
     */
    CompactionReport compact(MemoryLocation location);

    /**
     * {@link #compact(MemoryLocation)} at every location, in the order of {@link #locations()}; device work in flight
     * on their buffers is waited for up to the device wait timeout in all, not at each location.
     */
    List<CompactionReport> compact();

    /**
     * Starts recording every allocation and free at every location (what was asked, when, on which thread, and with
     * {@link RecordingOptions#callSiteFrames()} where), until {@link #stopRecording()}, or until
     * {@link RecordingOptions#maxEvents()} events are kept: then it records nothing more and its trace says it was
     * truncated. The trace is in the format the trace replayer reads. Not recording, an allocation or free pays one
     * volatile read for it; recording, a lock shared by all threads, and a stack walk with call sites. Throws
     * {@link IllegalStateException} while a recording is under way, once the manager is closed, or when recording is
     * off ({@code compute.memory.recording.enabled=false}).
     */
    void startRecording(RecordingOptions options);

    /** Stops the recording under way and returns what it kept; throws {@link IllegalStateException} when none is. */
    AllocationTrace stopRecording();

    /** True from {@link #startRecording} to {@link #stopRecording()}, also once the recording reached its bound. */
    boolean isRecording();

    /** The op set (fill, scale, axpy, sum) on this manager's buffers. */
    ComputeOps ops();

    /**
     * One's own kernels on this manager's buffers: compiled once per manager from OpenCL C, PTX or Java
     * ({@link KernelSource}), launched with buffers, slices and scalars ({@link ComputeKernel#launch}), from any thread.
     * The kernels are released when the manager closes.
     */
    Kernels kernels();

    /**
     * The device's native objects, for code that builds its own native work on this manager's device (its own
     * programs, modules or library calls): {@code OpenClNativeDevice} (context, device, queue) on OpenCL,
     * {@code CudaNativeDevice} (context, device, the calling thread's stream) on CUDA, as
     * {@link BufferAccess#handle(Class)} gives them for one buffer. Valid until the manager closes; release what you
     * make with them before that.
     *
     * @throws IllegalStateException the backend has no such type (the CPU has none), or the manager is closed
     */
    <T extends NativeDevice> T nativeDevice(Class<T> type);

    /**
     * Buffers still open, with their allocation sites where leak detection recorded them; mapped files among them
     * with their file.
     */
    List<LiveBufferReport> liveBuffers();

    /**
     * Buffers found garbage-collected without {@code close()} since the manager started, every one; the log has a
     * {@code LEAK} line with each allocation site's trace once, then one at the site's 2nd, 4th, 8th ... leak. Only
     * tracked buffers can be found: all at {@code paranoid}, about one in
     * {@value LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} at {@code simple}, none at {@code disabled}.
     */
    long leaksDetected();

    /**
     * A budget of {@code limitBytes} over this manager's pools, reserving nothing: buffers allocated through it share
     * the pools but count against its limit and in its figures (see {@link MemoryBudget}).
     */
    MemoryBudget budget(String name, long limitBytes);

    /**
     * A budget over this manager's pools as {@code spec} says: its limits, at all locations and per location, and the
     * bytes reserved for it alone at a location, which the budgets together keep within that location's cap (see
     * {@link MemoryBudget}). Budgets under it: {@link MemoryBudget#child(BudgetSpec)}.
     *
     * @throws BudgetReservationException a reservation does not fit beside those of the other budgets and what they
     *                                  hold (the message says which)
     * @throws IllegalStateException    the manager is closed
     * @throws IllegalArgumentException a reservation at a location this manager does not have
     */
    MemoryBudget budget(BudgetSpec spec);

    /** The budgets made by {@link #budget} and not yet closed (not those under them: see {@link MemoryBudget#children()}). */
    List<MemoryBudget> budgets();

    /** True once {@link #close()} has begun. */
    boolean isClosed();

    /**
     * Makes every buffer unusable at once, ends every view and access (those of the calling thread and shared ones
     * now; another thread's when it next calls into the manager or ends), waits for calls under way and device
     * work, then reports buffers still open (in the log, as leaks), frees every segment at every location and
     * closes the backend. The waits are bounded, in all, by {@code compute.memory.close-timeout} (the backend's close, on
     * an idle device, by what is left of it, 1 s at least): memory still held after it is kept rather than freed under
     * its holder (and said in the log). Closing twice is harmless.
     */
    @Override
    void close();
}
