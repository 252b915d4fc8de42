package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The {@code replay} command as a user runs it: its exit status and what it prints, for traces that fit and that fail. */
class ReplayCommandTest {

    @TempDir
    Path dir;

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    private int replay(String... args) {
        List<String> all = new ArrayList<>(List.of("--warmups", "0", "--runs", "1"));
        all.addAll(List.of(args));
        return ReplayCommand.run(all.toArray(String[]::new), new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    private String out() {
        return out.toString(StandardCharsets.UTF_8);
    }

    private String err() {
        return err.toString(StandardCharsets.UTF_8);
    }

    private Path trace(String name, String text) throws IOException {
        return Files.writeString(dir.resolve(name), text);
    }

    @Test
    void aShortTraceIsWarmedUpOverMoreReplaysThanALongOne() throws IOException {
        Trace shortTrace = Trace.read("short", new ByteArrayInputStream("a,1,512,0\nf,1\n".repeat(5_000).getBytes(StandardCharsets.UTF_8)));
        Trace longTrace = Trace.read("long", new ByteArrayInputStream("a,1,512,0\nf,1\n".repeat(100_000).getBytes(StandardCharsets.UTF_8)));

        assertThat(ReplayCommand.defaultWarmups(shortTrace)).isEqualTo(200);
        assertThat(ReplayCommand.defaultWarmups(longTrace)).isEqualTo(ReplayCommand.MIN_WARMUPS);
    }

    @Test
    void pytorchAddsTheLineOfPyTorchsPolicyOnTheSameTrace() throws IOException {
        Path file = trace("fits.csv", "a,1,10485760,0\na,2,10485760,0\nf,1\nf,2\n");

        assertThat(replay("--pytorch", file.toString())).isZero();
        // two 10 MiB blocks fill one of PyTorch's 20 MiB large pages: one map call, nothing over the live peak; the first
        // allocation forces a call on any allocator, the second fits under the 20 MiB PyTorch had reserved
        assertThat(out()).containsPattern("(?m)^replay trace=fits.csv .*\npytorch trace=fits.csv policy=expandable_segments"
                + " reserved_peak=20971520 overhead=1.000 min_capacity=20971520 capacity_ratio=1.000 backend_calls=1 maps=1 unmaps=0 forced_calls=1$");
        assertThat(err()).isEmpty();
    }

    @Test
    void aTraceThatFitsExitsZeroWithItsSettingsAndFigures() throws IOException {
        Path file = trace("fits.csv", "a,1,10485760,0\na,2,10485760,0\nf,1\nf,2\n");

        assertThat(replay("--max-pool-size", "64m", "--release-threshold", "0", "--no-expandable", file.toString())).isZero();
        assertThat(out()).contains("# settings: max-pool-size=67108864 max-pinned-size=the capacity release-threshold=0"
                        + " trim-interval=PT5M of trace time expandable-segments=false")
                .contains("replay trace=fits.csv events=4 live_peak=20971520 ").contains("skipped_frees=0 trims=0");
        assertThat(err()).isEmpty();
    }

    @Test
    void settingsTooSmallForTheTraceExitOneNamingTheEventThatFailed() throws IOException {
        Path file = trace("big.csv", "# a comment\na,1,10485760,0\na,2,10485760,0\n");

        assertThat(replay("--max-pool-size", "16MB", file.toString())).isEqualTo(1);
        assertThat(err()).startsWith("replay failed: big.csv line 3, event 2 (allocation of 10485760 bytes, id 2, stream 0) failed")
                .contains("the pool capped at 16777216 bytes");
        assertThat(out()).doesNotContain("replay trace=");
    }

    @Test
    void aFreeOfAnIdNotLiveIsSkippedAndCountedOrFailsUnderStrict() throws IOException {
        Path file = trace("earlier.csv", "a,1,4096,0\nf,7\nf,1\n");

        assertThat(replay(file.toString())).isZero();
        assertThat(out()).contains("skipped_frees=1");
        assertThat(replay("--strict", file.toString())).isEqualTo(1);
        assertThat(err()).contains("replay failed: earlier.csv line 2 (f,7): id 7 is not live");
    }

    @Test
    void aWrongCommandLineExitsTwoWithTheUsage() throws IOException {
        Path file = trace("t.csv", "a,1,4096,0\n");

        assertThat(replay()).isEqualTo(2);
        assertThat(err()).contains("no trace file given").contains("usage: replay");
        assertThat(replay("--max-pool-size", "lots", file.toString())).isEqualTo(2);
        assertThat(err()).contains("not a size: lots");
        assertThat(replay("--frobnicate", file.toString())).isEqualTo(2);
        assertThat(err()).contains("unknown option --frobnicate");
        assertThat(replay("--max-pool-size", "1g", "--release-threshold", "2g", file.toString())).isEqualTo(2);
        assertThat(err()).contains("a pool cannot keep more cache than it may reserve");
        assertThat(replay("--trim-interval", "soon", file.toString())).isEqualTo(2);
        assertThat(err()).contains("not a duration: soon");
        assertThat(replay("--runs")).isEqualTo(2);
        assertThat(err()).contains("--runs needs a value");
    }

    /** A backend the usage does not name is a wrong command line, said before anything is printed or opened. */
    @Test
    void anUnknownBackendIsAWrongCommandLine() throws IOException {
        Path file = trace("t.csv", "a,1,4096,0\n");

        assertThat(replay("--backend", "gpu", file.toString())).isEqualTo(2);
        assertThat(err()).startsWith("replay: unknown backend gpu").contains("usage: replay");
        assertThat(out()).isEmpty();
    }

    /** A trim interval is counted in the trace's nanoseconds: one longer than a long of them is a wrong command line, not a crash. */
    @Test
    void aTrimIntervalBeyondWhatNanosecondsHoldIsAWrongCommandLine() throws IOException {
        Path file = trace("timed.csv", "a,1,4096,0,DEVICE,1,5\nf,1,1,10\n");

        assertThat(replay("--trim-interval", "999999999999999999d", file.toString())).isEqualTo(2);
        assertThat(err()).contains("replay: not a duration").contains("usage: replay");
        assertThat(replay("--trim-interval", "1000000d", file.toString())).isEqualTo(2);
        assertThat(err()).contains("1000000d");
        assertThat(replay("--trim-interval", "100000d", file.toString())).isZero();
        assertThat(ReplayCommand.parseDuration("PT2562047H")).isEqualTo(Duration.ofHours(2_562_047));
    }

    @Test
    void helpPrintsTheUsageAndAnUnknownShortOptionIsNoFileName() {
        assertThat(replay("-h")).isZero();
        assertThat(replay("--help")).isZero();
        assertThat(replay("-x")).isEqualTo(2);
        assertThat(err()).contains("unknown option -x").contains(ReplayCommand.USAGE);
    }

    @Test
    void aMissingFileOrLocationExitsOne() throws IOException {
        assertThat(replay(dir.resolve("absent.csv.gz").toString())).isEqualTo(1);
        assertThat(err()).contains("replay failed: " + dir.resolve("absent.csv.gz") + ": no such file").doesNotContain("Exception");
        Path file = trace("t.csv", "a,1,4096,0,HOST\n");
        assertThat(replay("--location", "device", file.toString())).isEqualTo(1);
        assertThat(err()).contains("t.csv has no events at DEVICE; it has HOST");
    }

    /**
     * A trace with no allocation (an empty file, a recording of a quiet minute that holds only frees of earlier blocks)
     * has no live peak to measure against: the replay says so, naming the file, rather than failing on a device of 0 bytes.
     */
    @Test
    void aTraceWithoutAllocationsFailsSayingSo() throws IOException {
        Path empty = trace("empty.csv", "");
        Path onlyFrees = trace("frees.csv", "# thread,1,main\nf,7,1,10\nf,8,1,20\n");

        assertThat(replay(empty.toString())).isEqualTo(1);
        assertThat(err()).contains("replay failed: empty.csv has no allocations to replay").doesNotContain("capacity must be positive");
        err.reset();
        assertThat(replay("--pytorch", onlyFrees.toString())).isEqualTo(1);
        assertThat(err()).contains("replay failed: frees.csv has no allocations to replay").contains("2 frees of ids not live");
    }

    /**
     * A trace that cannot be read (a gzip file cut short, a plain file named .gz, a directory) fails naming the file, and
     * where it broke off, the line: with several files given, the message says which one.
     */
    @Test
    void aTraceThatCannotBeReadIsNamedInTheMessage() throws IOException {
        ByteArrayOutputStream gzipped = new ByteArrayOutputStream();
        try (GZIPOutputStream gzip = new GZIPOutputStream(gzipped)) {
            gzip.write("a,1,4096,0\nf,1\n".repeat(10_000).getBytes(StandardCharsets.UTF_8));
        }
        Path cut = Files.write(dir.resolve("cut.csv.gz"), Arrays.copyOf(gzipped.toByteArray(), gzipped.size() / 2));
        Path plain = trace("plain.csv.gz", "a,1,4096,0\n");
        Path directory = Files.createDirectory(dir.resolve("traces.csv"));
        Path fine = trace("fine.csv", "a,1,4096,0\n");

        assertThat(replay(fine.toString(), cut.toString())).isEqualTo(1);
        assertThat(err()).contains("replay failed: ").contains("cut.csv.gz line ").contains("Unexpected end of ZLIB input stream");
        err.reset();
        assertThat(replay(plain.toString())).isEqualTo(1);
        assertThat(err()).contains("plain.csv.gz").contains("Not in GZIP format");
        err.reset();
        assertThat(replay(directory.toString())).isEqualTo(1);
        assertThat(err()).contains("traces.csv").contains("directory");
    }

    /**
     * End to end: a manager on the CPU backend records two threads at two locations, a buffer allocated before the
     * recording is freed during it, and the written trace replays per location with its threads named.
     */
    @Test
    void aTraceRecordedFromAManagerReplaysPerLocationWithItsThreads() throws Exception {
        Path file = dir.resolve("service.csv.gz");
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").trimInterval(Duration.ZERO).build()) {
            UnifiedBuffer earlier = manager.allocate(1 << 20, MemoryLocation.HOST);
            manager.startRecording(RecordingOptions.defaults());
            Thread worker = Thread.ofPlatform().name("scorer-1").start(() -> {
                for (int i = 0; i < 100; i++) {
                    try (UnifiedBuffer buffer = manager.allocate(4096L * (1 + i % 7), MemoryLocation.DEVICE)) {
                        buffer.copyFrom(new byte[] {1});
                    }
                }
            });
            for (int i = 0; i < 50; i++) {
                manager.allocate(100_000, MemoryLocation.HOST).close();
            }
            worker.join();
            earlier.close();
            AllocationTrace trace = manager.stopRecording();
            trace.writeTo(file);
            assertThat(trace.earlierBlockFrees()).isEqualTo(1);
        }

        assertThat(replay(file.toString())).as(err()).isZero();
        assertThat(out()).contains("replay trace=service.csv.gz location=HOST events=100 ")
                .contains("replay trace=service.csv.gz location=DEVICE events=200 ")
                .contains("skipped_frees=1").contains("(scorer-1)").contains("live peak by thread");
        assertThat(replay("--location", "device", file.toString())).isZero();
        assertThat(replay("--strict", file.toString())).isEqualTo(1);
        assertThat(err()).contains("service.csv.gz line ").contains("is not live");
    }

    @Test
    void sizesTakeBinarySuffixes() {
        assertThat(ReplayCommand.parseBytes("80g")).isEqualTo(80L << 30);
        assertThat(ReplayCommand.parseBytes("512M")).isEqualTo(512L << 20);
        assertThat(ReplayCommand.parseBytes("4096")).isEqualTo(4096);
        assertThat(ReplayCommand.parseBytes("6GB")).as("as Spring reads 6GB").isEqualTo(6L << 30);
        assertThat(ReplayCommand.parseBytes("256MiB")).isEqualTo(256L << 20);
        assertThatThrownBy(() -> ReplayCommand.parseBytes("0")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ReplayCommand.parseBytes("-1g")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ReplayCommand.parseBytes("lots")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void durationsAreWrittenAsInApplicationYaml() {
        assertThat(ReplayCommand.parseDuration("5m")).isEqualTo(Duration.ofMinutes(5));
        assertThat(ReplayCommand.parseDuration("30s")).isEqualTo(Duration.ofSeconds(30));
        assertThat(ReplayCommand.parseDuration("250ms")).isEqualTo(Duration.ofMillis(250));
        assertThat(ReplayCommand.parseDuration("PT1H")).isEqualTo(Duration.ofHours(1));
        assertThat(ReplayCommand.parseDuration("0")).isZero();
        assertThatThrownBy(() -> ReplayCommand.parseDuration("-5m")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ReplayCommand.parseDuration("")).isInstanceOf(IllegalArgumentException.class);
    }
}
