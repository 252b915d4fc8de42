package dev.compute.memory;

import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import java.util.List;
import java.util.Map;

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

    /** Buffers still open, with their allocation sites where leak detection recorded them. */
    List<LiveBufferReport> liveBuffers();

    /**
     * Buffers found garbage-collected without {@code close()} since the manager started, each also logged as a
     * {@code LEAK}. Only tracked buffers can be found: all at {@code paranoid}, about one in
     * {@value LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} at {@code simple}, none at {@code disabled}.
     */
    long leaksDetected();

    /** True once {@link #close()} has begun. */
    boolean isClosed();

    /**
     * Makes every buffer unusable at once, ends every view and access (those of the calling thread and shared ones
     * now; another thread's when it next calls into the manager or ends), waits for calls under way and device
     * work, then reports buffers still open (in the log, as leaks), frees every segment at every location and
     * closes the backend. The waits are bounded, in all, by {@code compute.memory.close-timeout}: memory still held
     * after it is kept rather than freed under its holder (and said in the log). Closing twice is harmless.
     */
    @Override
    void close();
}
