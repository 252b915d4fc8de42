package dev.compute.memory.jfr;

import dev.compute.memory.MemoryEventListener;

/**
 * The listener every manager registers, which emits the pool's events to JDK Flight Recorder: backend allocations
 * and frees, allocations that failed with out-of-memory and recoveries from it, trims and leaks, each named
 * {@code dev.compute.memory.*} in the categories Compute / Memory. This class names no JFR type, so that a runtime
 * image without the {@code jdk.jfr} module (a trimmed {@code jlink} image) gets a listener that does nothing
 * rather than a {@link NoClassDefFoundError}.
 */
public final class JfrMemoryEvents {

    private JfrMemoryEvents() {}

    /** A listener that emits each event when a recording takes it, or {@link MemoryEventListener#NONE} without JFR. */
    public static MemoryEventListener listener() {
        return ModuleLayer.boot().findModule("jdk.jfr").isPresent() ? new JfrMemoryEventListener() : MemoryEventListener.NONE;
    }
}
