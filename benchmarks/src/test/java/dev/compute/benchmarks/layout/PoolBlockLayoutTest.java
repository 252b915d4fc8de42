package dev.compute.benchmarks.layout;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.openjdk.jol.info.ClassLayout;
import org.openjdk.jol.info.FieldLayout;

/**
 * The pool's block record keeps the fields the size-class cache writes on every allocate and free on cache lines of
 * their own: at least 64 bytes into the object, and far enough before its end that a line holding them reaches no
 * further than the next object's mark word. A JVM that laid the fields out otherwise would bring back the false
 * sharing that made pairs on two threads several times slower; JOL reads the layout this JVM chose. Here rather than in
 * compute-core because JOL, a measuring tool, is a dependency of the benchmarks only.
 */
class PoolBlockLayoutTest {

    private static final long CACHE_LINE = 64;
    /** The part of the next object's header that a line reaching into it may hold: nothing on the hot path reads it. */
    private static final long MARK_WORD = 8;
    private static final long OBJECT_ALIGNMENT = 8;

    @Test
    void theFieldsWrittenOnEveryAllocateAndFreeShareNoCacheLineWithAnotherObject() throws ClassNotFoundException {
        ClassLayout layout = ClassLayout.parseClass(Class.forName("dev.compute.memory.resource.pool.PoolBlock"));
        Map<String, FieldLayout> fields = layout.fields().stream().collect(Collectors.toMap(FieldLayout::name, f -> f));

        List<FieldLayout> written = Stream.of("requested", "state", "stripe").map(fields::get).toList();
        long firstWritten = written.stream().mapToLong(FieldLayout::offset).min().orElseThrow();
        long lastWritten = written.stream().mapToLong(field -> field.offset() + field.size()).max().orElseThrow();

        assertThat(firstWritten).as("offset of the first written field").isGreaterThanOrEqualTo(CACHE_LINE);
        // objects start on 8 bytes and lines on 64: a line holding the last written byte starts on its 8-byte word at the latest
        long lastWrittenWord = (lastWritten - 1) & -OBJECT_ALIGNMENT;
        assertThat(lastWrittenWord + CACHE_LINE).as("the furthest byte a line holding a written field reaches, + 1")
                .isLessThanOrEqualTo(layout.instanceSize() + MARK_WORD);
        assertThat(fields.get("home").offset()).as("the place fields come first").isLessThan(firstWritten);
    }
}
