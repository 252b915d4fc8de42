package dev.compute.memory.cpu;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;

/** What the child-JVM scenarios share: their manager, and checks that end the child with a failure a test can read. */
final class ScenarioSupport {

    private ScenarioSupport() {}

    /** A CPU manager without a maintenance thread, so that only the scenario's own calls move it. */
    static UnifiedMemoryManager manager(Duration closeTimeout, LeakDetectionLevel leaks) {
        return UnifiedMemoryManager.builder().backend("cpu").leakDetection(leaks).closeTimeout(closeTimeout)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).heldMemoryWarning(Duration.ZERO).build();
    }

    /** {@code use} must fail as a use of memory that was given back does: with an IllegalStateException. */
    static void expectEnded(Runnable use, String what) {
        try {
            use.run();
        } catch (IllegalStateException expected) {
            return;
        }
        throw new AssertionError(what + " did not fail: it reached memory that was given back");
    }

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }
}
