package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The model of PyTorch's allocator with expandable segments: on the BERT trace it gives what PyTorch itself reserved,
 * mapped and needed on the H100 (the trace's README: overhead 1.092, capacity ratio 1.014, 181 device allocations), and
 * on small hand-made traces each rule it follows.
 */
class PyTorchExpandableSegmentsTest {

    private static final long MIB = 1L << 20;

    private static PyTorchExpandableSegments.Figures replay(String events) throws IOException {
        return PyTorchExpandableSegments.replay(Trace.read("hand-made", new ByteArrayInputStream(events.getBytes(StandardCharsets.UTF_8))));
    }

    @Test
    void onTheBertTraceItReservesAndMapsWhatPyTorchDidOnTheH100() throws IOException {
        Trace bert;
        try (InputStream in = new GZIPInputStream(Objects.requireNonNull(getClass().getResourceAsStream("/traces/bert_dynamic_bf16.csv.gz")))) {
            bert = Trace.read("bert", in);
        }

        PyTorchExpandableSegments.Figures figures = PyTorchExpandableSegments.replay(bert);

        assertThat((double) figures.reservedPeak() / bert.livePeak()).as("overhead").isBetween(1.0915, 1.0925);
        assertThat(figures.mapCalls()).as("map calls").isEqualTo(181);
        assertThat((double) PyTorchExpandableSegments.smallestCapacity(bert) / bert.livePeak()).as("capacity ratio").isBetween(1.0135, 1.0145);
    }

    @Test
    void outOfMemoryUnmapsTheFreePagesAndRetries() throws IOException {
        // 30 MiB maps two 20 MiB pages; freed, they stay mapped until a small block does not fit beside them
        Trace freedFirst = Trace.read("freed", new ByteArrayInputStream("a,1,31457280,0\nf,1\na,2,1000,0\n".getBytes(StandardCharsets.UTF_8)));
        Trace stillLive = Trace.read("live", new ByteArrayInputStream("a,1,31457280,0\na,2,1000,0\n".getBytes(StandardCharsets.UTF_8)));

        assertThat(PyTorchExpandableSegments.fits(freedFirst, 40 * MIB)).isTrue();
        assertThat(PyTorchExpandableSegments.fits(stillLive, 40 * MIB)).isFalse();
        assertThat(PyTorchExpandableSegments.fits(stillLive, 42 * MIB)).isTrue();
        assertThat(PyTorchExpandableSegments.smallestCapacity(stillLive)).isEqualTo(42 * MIB);
    }

    static Stream<Arguments> rules() {
        return Stream.of(
                Arguments.of("a large block maps whole 20 MiB pages, a small one 2 MiB pages", "a,1,20971521,0\na,2,1000,0\n", 42 * MIB, 2),
                Arguments.of("a block that fits the rest of a mapped page maps nothing", "a,1,12582912,0\na,2,6291456,0\n", 20 * MIB, 1),
                // 12 MiB live, then 16 MiB: the 8 MiB free after the first grows by one page, not two
                Arguments.of("a free block at the end grows into new pages rather than leave a gap", "a,1,12582912,0\na,2,16777216,0\n", 40 * MIB, 2),
                Arguments.of("freed blocks merge and are reused without mapping", "a,1,10485760,0\na,2,10485760,0\nf,1\nf,2\na,3,20971520,0\n", 20 * MIB, 1),
                Arguments.of("nothing is unmapped while allocations succeed", "a,1,104857600,0\nf,1\na,2,1048577,0\n", 100 * MIB, 1),
                Arguments.of("each stream has segments of its own", "a,1,10485760,0\na,2,10485760,1\n", 40 * MIB, 2));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rules")
    void eachRuleOfPyTorchsPolicy(String rule, String events, long reservedPeak, long mapCalls) throws IOException {
        PyTorchExpandableSegments.Figures figures = replay(events);

        assertThat(figures.reservedPeak()).isEqualTo(reservedPeak);
        assertThat(figures.mapCalls()).isEqualTo(mapCalls);
    }

    @Test
    void anAllocationThatTakesTheLiveBytesPastPyTorchsPeakSoFarForcesACall() throws IOException {
        // 10 MiB blocks: the first, third and fifth take the live bytes past what PyTorch had reserved (0, 20, 40 MiB),
        // where it maps a page each; the block allocated after a free fits under its peak of 60 MiB
        PyTorchExpandableSegments.Figures climb = replay("a,1,10485760,0\na,2,10485760,0\na,3,10485760,0\na,4,10485760,0\n"
                + "a,5,10485760,0\nf,5\na,6,10485760,0\n");
        // PyTorch maps a page for the second stream, but 10 MiB live again is no more than the 20 MiB it had reserved
        PyTorchExpandableSegments.Figures twoStreams = replay("a,1,10485760,0\nf,1\na,2,10485760,1\n");

        assertThat(climb.mapCalls()).isEqualTo(3);
        assertThat(climb.forcedCalls()).isEqualTo(3);
        assertThat(twoStreams.mapCalls()).isEqualTo(2);
        assertThat(twoStreams.forcedCalls()).isEqualTo(1);
    }

    @Test
    void sizesAreRoundedToFiveHundredTwelveBytes() {
        assertThat(PyTorchExpandableSegments.roundSize(1)).isEqualTo(512);
        assertThat(PyTorchExpandableSegments.roundSize(512)).isEqualTo(512);
        assertThat(PyTorchExpandableSegments.roundSize(513)).isEqualTo(1024);
    }
}
