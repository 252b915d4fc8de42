package dev.compute.benchmarks.layout;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.openjdk.jol.info.ClassLayout;
import org.openjdk.jol.info.FieldLayout;

/**
 * The pool's block record keeps the two fields the size-class cache writes on every allocate and free on cache lines of
 * their own: at least 64 bytes into the object, and at least 55 bytes before its end (so the line holding them reaches
 * no further than the next object's mark word). A JVM that laid the fields out otherwise would bring back the false
 * sharing that made pairs on two threads several times slower; JOL reads the layout this JVM chose. Here rather than in
 * compute-core because JOL, a measuring tool, is a dependency of the benchmarks only.
 */
class PoolBlockLayoutTest {

    private static final long CACHE_LINE = 64;
    /** The part of the next object's header that a line reaching into it may hold: nothing on the hot path reads it. */
    private static final long MARK_WORD = 8;

    @Test
    void theFieldsWrittenOnEveryAllocateAndFreeShareNoCacheLineWithAnotherObject() throws ClassNotFoundException {
        ClassLayout layout = ClassLayout.parseClass(Class.forName("dev.compute.memory.resource.pool.PoolBlock"));
        Map<String, FieldLayout> fields = layout.fields().stream().collect(Collectors.toMap(FieldLayout::name, f -> f));

        long firstWritten = Math.min(fields.get("requested").offset(), fields.get("state").offset());
        long lastWritten = Math.max(fields.get("requested").offset() + fields.get("requested").size(),
                fields.get("state").offset() + fields.get("state").size());

        assertThat(firstWritten).as("offset of the first written field").isGreaterThanOrEqualTo(CACHE_LINE);
        assertThat(layout.instanceSize() - lastWritten).as("bytes after the last written field")
                .isGreaterThanOrEqualTo(CACHE_LINE - MARK_WORD - 1);
        assertThat(fields.get("home").offset()).as("the place fields come first").isLessThan(firstWritten);
    }
}
