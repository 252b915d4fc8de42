package dev.compute.memory.recording;

/**
 * What a recording keeps: at most {@code maxEvents} allocations and frees (then it records nothing more and its
 * trace says it was truncated), and with each allocation the first {@code callSiteFrames} frames of the code that
 * asked for it, from the caller of the manager on (0: none; taking them walks the stack, which costs microseconds
 * per allocation). An event takes about 40 bytes of heap, a call site more the first time it is seen.
 */
public record RecordingOptions(int maxEvents, int callSiteFrames) {

    public static final int DEFAULT_MAX_EVENTS = 1_000_000;
    /** The most events one recording may keep: about 400 MB of heap. */
    public static final int MAX_EVENTS = 10_000_000;
    /** Enough to reach the application's code through a web framework's frames. */
    public static final int MAX_CALL_SITE_FRAMES = 64;

    public RecordingOptions {
        if (maxEvents < 1 || maxEvents > MAX_EVENTS) {
            throw new IllegalArgumentException("maxEvents must be from 1 to " + MAX_EVENTS + ": " + maxEvents);
        }
        if (callSiteFrames < 0 || callSiteFrames > MAX_CALL_SITE_FRAMES) {
            throw new IllegalArgumentException("callSiteFrames must be from 0 (none) to " + MAX_CALL_SITE_FRAMES + ": " + callSiteFrames);
        }
    }

    /** {@value #DEFAULT_MAX_EVENTS} events, no call sites. */
    public static RecordingOptions defaults() {
        return new RecordingOptions(DEFAULT_MAX_EVENTS, 0);
    }
}
