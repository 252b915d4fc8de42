package dev.compute.memory.cpu;

/** The two checks the child-JVM scenarios make, which end the child with a failure a test can read. */
final class ScenarioChecks {

    private ScenarioChecks() {}

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
