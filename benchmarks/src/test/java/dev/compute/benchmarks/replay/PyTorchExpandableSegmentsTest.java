package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.Test;

/**
 * The model of PyTorch's allocator with expandable segments: on the BERT trace it gives what PyTorch itself reserved and
 * mapped on the H100 (the trace's README: overhead 1.092, 181 device allocations), and on small hand-made traces each
 * rule it follows.
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
    }

    @Test
    void aLargeBlockMapsWholeTwentyMebibytePagesAndASmallOneTwoMebibytePages() throws IOException {
        PyTorchExpandableSegments.Figures figures = replay("a,1,20971521,0\na,2,1000,0\n");

        assertThat(figures.reservedPeak()).isEqualTo(40 * MIB + 2 * MIB);
        assertThat(figures.mapCalls()).isEqualTo(2);
    }

    @Test
    void aBlockThatFitsTheRestOfAMappedPageMapsNothing() throws IOException {
        PyTorchExpandableSegments.Figures figures = replay("a,1,12582912,0\na,2,6291456,0\n");

        assertThat(figures.reservedPeak()).isEqualTo(20 * MIB);
        assertThat(figures.mapCalls()).isEqualTo(1);
    }

    @Test
    void aFreeBlockAtTheEndGrowsIntoNewPagesRatherThanLeaveAGap() throws IOException {
        // 12 MiB live, then 16 MiB: the 8 MiB free after the first grows by one page (40 MiB mapped), not two
        PyTorchExpandableSegments.Figures figures = replay("a,1,12582912,0\na,2,16777216,0\n");

        assertThat(figures.reservedPeak()).isEqualTo(40 * MIB);
        assertThat(figures.mapCalls()).isEqualTo(2);
    }

    @Test
    void freedBlocksMergeAndAreReusedWithoutMapping() throws IOException {
        // two 10 MiB blocks fill a page; freed, they merge, and a 20 MiB block takes their place
        PyTorchExpandableSegments.Figures figures = replay("a,1,10485760,0\na,2,10485760,0\nf,1\nf,2\na,3,20971520,0\n");

        assertThat(figures.reservedPeak()).isEqualTo(20 * MIB);
        assertThat(figures.mapCalls()).isEqualTo(1);
    }

    @Test
    void nothingIsUnmappedWhileAllocationsSucceed() throws IOException {
        PyTorchExpandableSegments.Figures figures = replay("a,1,104857600,0\nf,1\na,2,1048577,0\n");

        assertThat(figures.reservedPeak()).isEqualTo(100 * MIB);
        assertThat(figures.mapCalls()).isEqualTo(1);
    }

    @Test
    void eachStreamHasSegmentsOfItsOwn() throws IOException {
        PyTorchExpandableSegments.Figures figures = replay("a,1,10485760,0\na,2,10485760,1\n");

        assertThat(figures.reservedPeak()).isEqualTo(40 * MIB);
        assertThat(figures.mapCalls()).isEqualTo(2);
    }

    @Test
    void sizesAreRoundedToFiveHundredTwelveBytes() {
        assertThat(PyTorchExpandableSegments.roundSize(1)).isEqualTo(512);
        assertThat(PyTorchExpandableSegments.roundSize(512)).isEqualTo(512);
        assertThat(PyTorchExpandableSegments.roundSize(513)).isEqualTo(1024);
    }
}
