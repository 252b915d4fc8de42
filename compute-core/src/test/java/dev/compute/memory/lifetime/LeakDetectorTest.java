package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemorySnapshot.BlockState;
import dev.compute.memory.resource.Block;
import dev.compute.memory.testing.LogCapture;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The leak detector on its own: which buffers each level tracks and with what site, a tracked handle collected without
 * close() reported once (a LEAK line, the listener's event, the count) with its core closed so that its memory goes
 * back, nothing reported for a buffer closed in time or once the manager is closed, and the sites a snapshot shows.
 * Handles are plain objects here: the detector watches whatever the manager hands it.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LeakDetectorTest {

    private record Leak(MemoryLocation location, long bytes, @Nullable String site) {}

    private final TestHost host = new TestHost();
    private final AtomicBoolean managerClosed = new AtomicBoolean();
    private final List<Leak> heard = new CopyOnWriteArrayList<>();
    private final MemoryEventListener listener = new MemoryEventListener() {
        @Override
        public void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {
            heard.add(new Leak(location, bytes, allocationSite));
        }
    };
    private final LogCapture log = LogCapture.managerLog();

    @AfterEach
    void stopCapturing() {
        log.close();
    }

    private LeakDetector detector(LeakDetectionLevel level) {
        return new LeakDetector(managerClosed::get, level, listener);
    }

    private BufferCore buffer() {
        return host.buffer(MemoryLocation.DEVICE, DataType.INT8, 64);
    }

    /** Tracks {@code core} under a handle that nothing references once this returns. */
    private static void trackDropped(LeakDetector detector, BufferCore core) {
        detector.track(new Object(), core);
    }

    private static void collectUntil(BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean() && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(10);
        }
    }

    /** One segment at {@code block}'s place, with it live and a free block after it. */
    private static List<MemorySnapshot.Segment> segmentOf(Block block) {
        return List.of(new MemorySnapshot.Segment(block.segment().address(), 2 * block.size(), false, List.of(
                new MemorySnapshot.Block(block.offset(), block.size(), BlockState.LIVE, block.requestedSize(), null),
                new MemorySnapshot.Block(block.offset() + block.size(), block.size(), BlockState.FREE, 0, null))));
    }

    @Test
    void theLibrarysOwnFramesAreNoAllocationSiteButItsTestsAre() {
        assertThat(LeakDetector.isLibraryFrame("dev.compute.memory.UnifiedBuffer")).isTrue();
        assertThat(LeakDetector.isLibraryFrame("dev.compute.memory.lifetime.LeakDetector")).isTrue();
        assertThat(LeakDetector.isLibraryFrame("dev.compute.memory.lifetime.LeakDetectorTest")).isFalse();
        assertThat(LeakDetector.isLibraryFrame("dev.compute.memoryx.Service")).isFalse();
        assertThat(LeakDetector.isLibraryFrame("com.example.Service")).isFalse();
    }

    @Test
    void disabledTracksNothing() {
        LeakDetector detector = detector(LeakDetectionLevel.DISABLED);
        BufferCore core = buffer();

        detector.track(new Object(), core);
        detector.trackMapping(new Object(), core, "site");

        assertThat(core.leakWatch).isNull();
        assertThat(detector.mappingSite()).isNull();
    }

    @Test
    void paranoidTracksEveryBufferWithTheSiteOfTheCodeThatAskedForIt() {
        LeakDetector detector = detector(LeakDetectionLevel.PARANOID);
        BufferCore core = buffer();

        detector.track(new Object(), core);
        String site = detector.mappingSite();

        assertThat(core.leakWatch).isNotNull();
        assertThat(site).contains("LeakDetectorTest.paranoidTracksEveryBufferWithTheSiteOfTheCodeThatAskedForIt")
                .doesNotContain("dev.compute.memory.lifetime.LeakDetector.");
        assertThat(site.lines()).allMatch(line -> line.startsWith("\tat "));
        assertThat(detector.withSites(MemoryLocation.DEVICE, segmentOf(core.ownBlock())).getFirst().blocks().getFirst().allocationSite())
                .contains("paranoidTracksEveryBufferWithTheSiteOfTheCodeThatAskedForIt");
        core.close(); // no leak to be found in a later test
    }

    @Test
    void simpleTracksAboutOneBufferInTheSamplingIntervalWithoutASiteAndEveryMapping() {
        LeakDetector detector = detector(LeakDetectionLevel.SIMPLE);
        int buffers = 50 * LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL;
        Block block = host.block(MemoryLocation.DEVICE, 64);
        int tracked = 0;
        for (int i = 0; i < buffers; i++) {
            BufferCore core = BufferCore.of(host, MemoryLocation.DEVICE, DataType.INT8, 64, block);
            detector.track(core, core); // its own handle: never collected, so never reported
            tracked += core.leakWatch != null ? 1 : 0;
        }
        BufferCore mapped = buffer();
        detector.trackMapping(new Object(), mapped, null);

        assertThat(tracked).as("about 50 of %d", buffers).isBetween(10, 150);
        assertThat(mapped.leakWatch).as("every mapping").isNotNull();
        assertThat(detector.mappingSite()).isNull();
        mapped.close();
    }

    @Test
    void aHandleCollectedWithoutCloseIsReportedOnceAndItsMemoryGoesBack() throws Exception {
        LeakDetector detector = detector(LeakDetectionLevel.PARANOID);
        BufferCore core = buffer();
        Block block = core.ownBlock();

        trackDropped(detector, core);
        collectUntil(() -> detector.leaksReported() > 0);

        assertThat(detector.leaksReported()).isEqualTo(1);
        assertThat(core.isClosed()).isTrue();
        assertThat(host.released).singleElement().satisfies(released -> assertThat(released.block()).isSameAs(block));
        assertThat(heard).singleElement().satisfies(leak -> {
            assertThat(leak.location()).isEqualTo(MemoryLocation.DEVICE);
            assertThat(leak.bytes()).isEqualTo(64);
            assertThat(leak.site()).contains("aHandleCollectedWithoutCloseIsReportedOnceAndItsMemoryGoesBack");
        });
        assertThat(log.messages(Level.SEVERE)).filteredOn(message -> message.contains("LeakDetectorTest.trackDropped"))
                .as("the LEAK line (other tests' leaks may be found meanwhile)").singleElement().asString()
                .startsWith("LEAK: a UnifiedBuffer of 64 bytes at DEVICE was garbage-collected without close(); "
                        + "its memory goes back to the pool now, or as the views and accesses still open on it end."
                        + " It was allocated at:\n\tat ")
                .contains("LeakDetectorTest.trackDropped");
        assertThat(detector.withSites(MemoryLocation.DEVICE, segmentOf(block)).getFirst().blocks().getFirst().allocationSite())
                .as("no longer live").isNull();
    }

    @Test
    void aSiteLeakingInALoopIsLoggedInFullOnceThenCountedAtEachPowerOfTwoWhileEveryLeakIsCounted() throws Exception {
        LeakDetector detector = detector(LeakDetectionLevel.PARANOID);
        int leaks = 20;
        for (int i = 0; i < leaks; i++) {
            trackDropped(detector, buffer()); // one site: this line
        }
        collectUntil(() -> detector.leaksReported() == leaks);

        assertThat(detector.leaksReported()).isEqualTo(leaks);
        assertThat(heard).as("the listener (meters, JFR) hears every leak").hasSize(leaks);
        assertThat(log.messages(Level.SEVERE)).filteredOn(message -> message.contains("aSiteLeakingInALoopIsLoggedInFullOnce"))
                .as("the site's trace, once").singleElement().asString()
                .startsWith("LEAK: a UnifiedBuffer of 64 bytes at DEVICE was garbage-collected without close(); "
                        + "its memory goes back to the pool now, or as the views and accesses still open on it end."
                        + " It was allocated at:\n\tat ");
        List<String> later = log.messages(Level.SEVERE).stream()
                .filter(message -> message.startsWith("LEAK: ") && !message.contains("a UnifiedBuffer of")).toList();
        assertThat(later).as("then one line, without the trace, at the site's 2nd, 4th, 8th and 16th leak").hasSize(4)
                .allMatch(line -> line.matches("LEAK: \\d+ UnifiedBuffers allocated at the site logged in full with the first of them \\(its first"
                        + " frame: dev\\.compute\\.memory\\.lifetime\\.LeakDetectorTest\\.trackDropped\\(LeakDetectorTest\\.java:\\d+\\)\\) have been"
                        + " garbage-collected without close\\(\\) so far; .*"));
        assertThat(later).map(line -> line.split(" ")[1]).containsExactly("2", "4", "8", "16");
    }

    @Test
    void aLeakedMappingSaysItIsUnmappedAndHowToFindWhereItWasMapped() throws Exception {
        LeakDetector detector = detector(LeakDetectionLevel.SIMPLE);
        BufferCore mapped = BufferCore.mapped(host, DataType.INT8, host.block(MemoryLocation.HOST, 64),
                new FileRange(Path.of("cache.bin"), FileMapMode.READ_ONLY, 0, 64));

        detector.trackMapping(new Object(), mapped, detector.mappingSite());
        collectUntil(() -> detector.leaksReported() > 0);

        assertThat(log.messages(Level.SEVERE)).filteredOn(message -> message.contains("cache.bin")).singleElement().isEqualTo("LEAK: a UnifiedBuffer of 64 bytes at HOST was garbage-collected"
                + " without close(); it was mapped read-only from cache.bin, and is unmapped now. Set compute.memory.leak-detection=paranoid"
                + " to see where leaked buffers are allocated.");
        assertThat(heard).containsExactly(new Leak(MemoryLocation.HOST, 64, null));
        assertThat(host.released).hasSize(1);
    }

    @Test
    void aBufferClosedInTimeIsNoLeakAndLeavesTheSnapshots() throws Exception {
        LeakDetector detector = detector(LeakDetectionLevel.PARANOID);
        BufferCore core = buffer();
        Block block = core.ownBlock();
        trackDropped(detector, core);
        assertThat(detector.withSites(MemoryLocation.DEVICE, segmentOf(block)).getFirst().blocks().getFirst().allocationSite()).isNotNull();

        core.close();

        assertThat(detector.withSites(MemoryLocation.DEVICE, segmentOf(block)).getFirst().blocks().getFirst().allocationSite()).isNull();
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(20);
        }
        assertThat(detector.leaksReported()).isZero();
        assertThat(heard).isEmpty();
        assertThat(host.released).as("released by its close only").hasSize(1);
    }

    /**
     * A handle collected once the manager is closing is no leak to report (the close reports the buffer as still open
     * and frees it), and its site stays for that report. Before, the cleaner dropped the site: a buffer dropped just
     * before a context closed was reported without where it was allocated (seen in StarterAloneTests under load).
     */
    @Test
    void aHandleCollectedOnceTheManagerIsClosedIsNotReportedAndKeepsItsSiteForTheClosesReport() {
        LeakDetector detector = detector(LeakDetectionLevel.PARANOID);
        BufferCore core = buffer();
        Block block = core.ownBlock();
        trackDropped(detector, core);
        managerClosed.set(true);

        core.leakWatch.run(); // as the cleaner does once the handle is collected

        assertThat(detector.withSites(MemoryLocation.DEVICE, segmentOf(block)).getFirst().blocks().getFirst().allocationSite())
                .as("the site, for the close's report").contains("aHandleCollectedOnceTheManagerIsClosedIsNotReportedAndKeepsItsSiteForTheClosesReport");
        assertThat(detector.leaksReported()).isZero();
        assertThat(heard).isEmpty();
        assertThat(host.released).as("the manager's close frees it").isEmpty();
        assertThat(log.messages(Level.SEVERE)).noneMatch(message -> message.contains("aHandleCollectedOnceTheManagerIsClosed"));
    }

    @Test
    void sitesFillOnlyTheLiveBlocksOfTrackedBuffersAtTheirLocation() {
        LeakDetector detector = detector(LeakDetectionLevel.PARANOID);
        BufferCore tracked = buffer();
        BufferCore untracked = buffer();
        detector.track(tracked, tracked);
        List<MemorySnapshot.Segment> trackedSegments = segmentOf(tracked.ownBlock());
        List<MemorySnapshot.Segment> untrackedSegments = segmentOf(untracked.ownBlock());

        List<MemorySnapshot.Segment> withSites = detector.withSites(MemoryLocation.DEVICE, trackedSegments);

        assertThat(withSites.getFirst().blocks().get(0).allocationSite()).isNotNull();
        assertThat(withSites.getFirst().blocks().get(1)).as("a free block").isEqualTo(trackedSegments.getFirst().blocks().get(1));
        assertThat(withSites.getFirst().address()).isEqualTo(trackedSegments.getFirst().address());
        assertThat(detector.withSites(MemoryLocation.DEVICE, untrackedSegments).getFirst().blocks().getFirst().allocationSite()).isNull();
        assertThat(detector.withSites(MemoryLocation.HOST, trackedSegments)).as("no site at another location: the same list")
                .isSameAs(trackedSegments);
        assertThat(detector(LeakDetectionLevel.PARANOID).withSites(MemoryLocation.DEVICE, trackedSegments)).isSameAs(trackedSegments);
    }
}
