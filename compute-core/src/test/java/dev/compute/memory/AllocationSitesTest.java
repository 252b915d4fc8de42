package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class AllocationSitesTest {

    private static final String CONTROLLER = "\tat com.example.shop.CartController.add(CartController.java:31)\n";
    private static final String SERVICE = "\tat com.example.shop.CartService.store(CartService.java:12)\n";
    private static final String OTHER_SERVICE = "\tat com.example.shop.CartService.restore(CartService.java:40)\n";
    private static final String SERVER = "\tat java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)\n"
            + "\tat org.springframework.web.method.support.InvocableHandlerMethod.doInvoke(InvocableHandlerMethod.java:258)\n"
            + "\tat org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:138)\n"
            + "\tat java.base/java.lang.Thread.run(Thread.java:1583)\n";

    @Test
    void aSiteKeepsTheApplicationsFramesAndSaysHowManyItLeftOut() {
        assertThat(AllocationSites.shorten(SERVICE + CONTROLLER + SERVER)).isEqualTo(SERVICE + CONTROLLER + "\t... 4 more\n");
    }

    @Test
    void frameworkFramesAboveTheApplicationsAreKept() {
        String library = "\tat org.apache.arrow.memory.Allocator.buffer(Allocator.java:7)\n";
        assertThat(AllocationSites.shorten(library + SERVICE + SERVER)).isEqualTo(library + SERVICE + "\t... 4 more\n");
    }

    @Test
    void aDeepApplicationStackIsCutAtTheMostFramesKept() {
        String deep = IntStream.range(0, 40).mapToObj(i -> "\tat com.example.Deep.level" + i + "(Deep.java:" + i + ")\n")
                .reduce("", String::concat);
        String shortened = AllocationSites.shorten(deep);
        assertThat(shortened.lines()).hasSize(AllocationSites.MAX_FRAMES + 1).last().isEqualTo("\t... 32 more");
        assertThat(shortened).startsWith("\tat com.example.Deep.level0(");
    }

    @Test
    void aSiteWithNothingToCutStaysAsItIsAndNoSiteStaysNone() {
        assertThat(AllocationSites.shorten(SERVICE + CONTROLLER)).isEqualTo(SERVICE + CONTROLLER);
        assertThat(AllocationSites.shorten(null)).isNull();
    }

    @Test
    void openBuffersAreGroupedByCallSiteAndLocationLargestFirstUpToTheLimit() {
        List<LiveBufferReport> open = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            open.add(new LiveBufferReport(MemoryLocation.DEVICE, 100, SERVICE + CONTROLLER + SERVER));
        }
        open.add(new LiveBufferReport(MemoryLocation.DEVICE, 100, SERVICE + "\tat com.example.shop.Batch.run(Batch.java:9)\n" + SERVER));
        open.add(new LiveBufferReport(MemoryLocation.HOST, 50, SERVICE + CONTROLLER + SERVER));
        open.add(new LiveBufferReport(MemoryLocation.DEVICE, 1000, OTHER_SERVICE + CONTROLLER + SERVER));
        open.add(new LiveBufferReport(MemoryLocation.DEVICE, 1, null));

        List<AllocationSites.CallSite> sites = AllocationSites.summarize(open, 10);

        assertThat(sites).extracting(AllocationSites.CallSite::location, AllocationSites.CallSite::buffers, AllocationSites.CallSite::sizeBytes)
                .containsExactly(
                        tuple(MemoryLocation.DEVICE, 1L, 1000L),
                        tuple(MemoryLocation.DEVICE, 4L, 400L),
                        tuple(MemoryLocation.HOST, 1L, 50L));
        assertThat(sites.get(1).allocationSite()).as("one of the group's sites, shortened").isEqualTo(SERVICE + CONTROLLER + "\t... 4 more\n");
        assertThat(AllocationSites.summarize(open, 1)).singleElement().extracting(AllocationSites.CallSite::sizeBytes).isEqualTo(1000L);
    }

    @Test
    void aRealSiteIsCutBelowThisTest() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
                .leakDetection(LeakDetectionLevel.PARANOID).build();
             UnifiedBuffer buffer = manager.allocate(64)) {
            String site = manager.liveBuffers().getFirst().allocationSite();
            assertThat(site.lines()).as("JUnit's frames below the test").hasSizeGreaterThan(10);

            String shortened = AllocationSites.shorten(site);
            assertThat(shortened.lines()).hasSize(2);
            assertThat(shortened).startsWith("\tat dev.compute.memory.AllocationSitesTest.aRealSiteIsCutBelowThisTest(AllocationSitesTest.java:")
                    .containsPattern("\t\\.\\.\\. \\d+ more\n$");
        }
    }
}
