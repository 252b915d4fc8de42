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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The pool's placement and mapping policy on seven traces, at the replayer's default settings (an 80 GiB address-space
 * device with 2 MiB pages): what it reserves at the peak against what is live (overhead) and its backend calls stay
 * within the figures the policy reached (docs/benchmarks.md, "Beyond the BERT trace"), so that a change that gives
 * them back fails here rather than unnoticed. Counts and bytes only: no timing.
 */
class TracePolicyTest {

    private static final long DEVICE = 80L << 30;
    private static final String BERT = "/traces/bert_dynamic_bf16.csv.gz";

    static Stream<Arguments> traces() {
        return Stream.of(
                Arguments.of("BERT", BERT, 1.0, 1.007, 121),
                Arguments.of("BERT x0.05", BERT, 0.05, 1.057, 48),
                Arguments.of("BERT x0.2", BERT, 0.2, 1.041, 86),
                Arguments.of("BERT x0.5", BERT, 0.5, 1.024, 97),
                Arguments.of("synthetic inference", "/traces/synthetic_inference.csv.gz", 1.0, 1.049, 232),
                Arguments.of("fixed-shape training", "/traces/fixed_shape_training.csv.gz", 1.0, 1.024, 106),
                Arguments.of("small-model training", "/traces/small_model_training.csv.gz", 1.0, 1.110, 69));
    }

    @ParameterizedTest(name = "{0}: overhead at most {3}, at most {4} backend calls")
    @MethodSource("traces")
    void theReservedPeakAndTheBackendCallsStayWithinWhatThePolicyReached(String name, String resource, double scale,
                                                                         double overheadBound, long callsBound) throws IOException {
        Trace trace = trace(name, resource, scale);
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults());

        TraceReplayer.Run run = replayer.replay(trace, DEVICE);

        assertThat(run.fitted()).isTrue();
        assertThat((double) run.reservedPeak() / trace.livePeak()).as("overhead (reserved peak / live peak)").isLessThanOrEqualTo(overheadBound);
        assertThat(run.backendCalls()).as("backend calls").isLessThanOrEqualTo(callsBound);
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
