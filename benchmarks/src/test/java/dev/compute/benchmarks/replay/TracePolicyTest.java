package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Objects;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The pool's policy on the sixteen traces of the table in docs/benchmarks.md ("The pool against PyTorch on every
 * trace"), at the replayer's default settings (an 80 GiB address-space device with 2 MiB pages), beside the model of
 * PyTorch's expandable segments on the same requests:
 * <ul>
 * <li>what the pool reserves at its peak against what is live (overhead) and its maps and unmaps (counted as PyTorch's
 * map calls are: no range reservations) stay within the figures of the table, so that a change that gives them back
 * fails here rather than unnoticed;</li>
 * <li>the smallest device the trace fits on is no larger than PyTorch's, on every trace;</li>
 * <li>where the table says the pool is no worse than PyTorch's in overhead, or in calls, it stays so.</li>
 * </ul>
 * Counts and bytes only: no timing.
 */
class TracePolicyTest {

    private static final long DEVICE = 80L << 30;
    private static final String BERT = "/traces/bert_dynamic_bf16.csv.gz";
    private static final String SYNTHETIC = "/traces/synthetic_inference.csv.gz";

    static Stream<Arguments> traces() {
        return Stream.of(
                // name, resource, scale, overhead at most, maps and unmaps at most, no worse than PyTorch's: overhead, calls
                Arguments.of("BERT", BERT, 1.0, 1.010, 100, true, true),
                Arguments.of("BERT x0.05", BERT, 0.05, 1.103, 47, true, true),
                Arguments.of("BERT x0.1", BERT, 0.1, 1.060, 58, true, true),
                Arguments.of("BERT x0.2", BERT, 0.2, 1.048, 74, true, true),
                Arguments.of("BERT x0.3", BERT, 0.3, 1.033, 85, true, true),
                Arguments.of("BERT x0.5", BERT, 0.5, 1.027, 86, true, true),
                Arguments.of("BERT x0.7", BERT, 0.7, 1.099, 105, true, true),
                Arguments.of("BERT x1.5", BERT, 1.5, 1.009, 111, true, true),
                Arguments.of("BERT x3", BERT, 3.0, 1.008, 164, true, true),
                Arguments.of("synthetic inference", SYNTHETIC, 1.0, 1.060, 137, true, true),
                Arguments.of("synthetic x0.5", SYNTHETIC, 0.5, 1.071, 84, true, true),
                Arguments.of("synthetic x0.9", SYNTHETIC, 0.9, 1.063, 112, true, true),
                Arguments.of("synthetic x1.1", SYNTHETIC, 1.1, 1.071, 146, true, true),
                Arguments.of("synthetic x2", SYNTHETIC, 2.0, 1.062, 236, true, true),
                Arguments.of("fixed-shape training", "/traces/fixed_shape_training.csv.gz", 1.0, 1.024, 104, false, true),
                Arguments.of("small-model training", "/traces/small_model_training.csv.gz", 1.0, 1.108, 57, false, true));
    }

    @ParameterizedTest(name = "{0}: overhead at most {3}, at most {4} maps and unmaps")
    @MethodSource("traces")
    void theReservedPeakAndTheCallsStayWithinTheTableAndTheCapacityWithinPyTorchs(String name, String resource, double scale,
                                                                                 double overheadBound, long callsBound,
                                                                                 boolean overheadNoWorse, boolean callsNoWorse) throws IOException {
        Trace trace = trace(name, resource, scale);
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults());

        TraceReplayer.Run run = replayer.replay(trace, DEVICE);
        PyTorchExpandableSegments.Figures pytorch = PyTorchExpandableSegments.replay(trace);

        assertThat(run.fitted()).isTrue();
        assertThat((double) run.reservedPeak() / trace.livePeak()).as("overhead (reserved peak / live peak)").isLessThanOrEqualTo(overheadBound);
        assertThat(run.mapsAndUnmaps()).as("maps and unmaps").isLessThanOrEqualTo(callsBound);
        long fitting = Math.ceilDiv(run.reservedPeak(), TraceReplayer.CAPACITY_STEP) * TraceReplayer.CAPACITY_STEP; // as replay searches
        assertThat(replayer.smallestCapacity(trace, fitting, DEVICE)).as("the smallest device it fits on, against PyTorch's")
                .isLessThanOrEqualTo(PyTorchExpandableSegments.smallestCapacity(trace));
        if (overheadNoWorse) {
            assertThat(run.reservedPeak()).as("reserved peak against PyTorch's").isLessThanOrEqualTo(pytorch.reservedPeak());
        }
        if (callsNoWorse) {
            assertThat(run.mapsAndUnmaps()).as("maps and unmaps against PyTorch's maps").isLessThanOrEqualTo(pytorch.mapCalls());
        }
    }

    @Test
    void onFixedShapeTrainingPyTorchsOverheadOnEveryPrefixForcesMoreThanTwiceThePoolsCalls() throws IOException {
        Trace trace = trace("fixed-shape training", "/traces/fixed_shape_training.csv.gz", 1.0);

        TraceReplayer.Run run = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults()).replay(trace, DEVICE);
        PyTorchExpandableSegments.Figures pytorch = PyTorchExpandableSegments.replay(trace);

        // no policy with fewer calls than these reserves no more than PyTorch at its peak on every prefix of the trace
        assertThat(pytorch.forcedCalls()).isEqualTo(225);
        assertThat(run.mapsAndUnmaps()).isLessThan(pytorch.forcedCalls() / 2);
    }

    @Test
    void onSmallModelTrainingThePoolsReservedPeakAndAllItsMapsComeInTheFirstSeventhOfTheTrace() throws IOException {
        Trace trace = trace("small-model training", "/traces/small_model_training.csv.gz", 1.0);
        Trace firstSeventh = trace.first(1_500); // of 10,430 events: the climb to 99.4 % of the live peak
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults());

        TraceReplayer.Run whole = replayer.replay(trace, DEVICE);
        TraceReplayer.Run climb = replayer.replay(firstSeventh, DEVICE);

        // the overhead is the slack of the climb's last chunk, not later steps' requests that fit no free piece
        assertThat(firstSeventh.livePeak()).isLessThan(trace.livePeak());
        assertThat(climb.reservedPeak()).isEqualTo(whole.reservedPeak());
        assertThat(climb.maps()).isEqualTo(whole.maps());
        assertThat(whole.unmaps()).isZero();
    }

    private static Trace trace(String name, String resource, double scale) throws IOException {
        try (InputStream in = new GZIPInputStream(Objects.requireNonNull(TracePolicyTest.class.getResourceAsStream(resource), resource))) {
            if (scale == 1.0) {
                return Trace.read(name, in);
            }
            ByteArrayOutputStream scaled = new ByteArrayOutputStream();
            TraceScaling.scale(name, in, scale, scaled);
            return Trace.read(name, new ByteArrayInputStream(scaled.toByteArray()));
        }
    }
}
