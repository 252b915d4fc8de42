package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MappedFileStatistics;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.web.client.RestClient;

/**
 * The figures a user builds alerts on read the same through {@link UnifiedMemoryManager#statistics()}, the
 * {@code computememory} endpoint and the Prometheus scrape once the application is at rest, over real HTTP: with
 * buffers open through the manager and through a budget's reservation, slices, a mapped file, a closed buffer held by
 * the view of an idle thread and an {@code allocateAsync} request waiting; and again once all of it is closed and the
 * cache released, when nothing is live, held or reserved. Every sum adds up at rest: requested ≤ allocated, and
 * allocated + cached + held = reserved.
 */
@SpringBootTest(classes = FiguresAgreeHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=computememory,prometheus", "management.endpoint.computememory.access=unrestricted",
        "compute.backend=cpu", "compute.memory.pooling.max-pool-size=64MB", "compute.memory.pooling.trim-interval=0",
        "compute.memory.timeline.interval=0", "compute.memory.held-memory-warning=0", "compute.budgets.tenant.limit=32MB", "compute.budgets.tenant.reservations.host=8MB"})
class FiguresAgreeHttpTests {

    private static final long MiB = 1L << 20;
    /** A sample of ours in the scrape: name, labels, value. */
    private static final Pattern SAMPLE = Pattern.compile("^(compute_[a-z_]+)\\{([^}]*)} (\\S+)$");
    /** Each per-location figure: its field in the endpoint's summary, its series in the scrape, the figure. */
    private static final List<Figure> FIGURES = List.of(
            new Figure("reservedBytes", "compute_memory_reserved_bytes", MemoryStatistics::reservedBytes),
            new Figure("reservedBytesPeak", "compute_memory_reserved_peak_bytes", MemoryStatistics::reservedBytesPeak),
            new Figure("allocatedBytes", "compute_memory_allocated_bytes", MemoryStatistics::allocatedBytes),
            new Figure("allocatedBytesPeak", "compute_memory_allocated_peak_bytes", MemoryStatistics::allocatedBytesPeak),
            new Figure("requestedBytes", "compute_memory_requested_bytes", MemoryStatistics::requestedBytes),
            new Figure("cachedBytes", "compute_memory_cached_bytes", MemoryStatistics::cachedBytes),
            new Figure("heldBytes", "compute_memory_held_bytes", MemoryStatistics::heldBytes),
            new Figure("heldBuffers", "compute_memory_held_buffers", MemoryStatistics::heldBuffers),
            new Figure("largestFreeBlockBytes", "compute_memory_largest_free_block_bytes", MemoryStatistics::largestFreeBlockBytes),
            new Figure("reservationsCachedBytes", "compute_memory_reservations_cached_bytes", MemoryStatistics::reservationsCachedBytes),
            new Figure("fragmentation", "compute_memory_fragmentation_ratio", MemoryStatistics::fragmentation),
            new Figure("overhead", "compute_memory_overhead_ratio", MemoryStatistics::overhead),
            new Figure("liveBuffers", "compute_memory_live_buffers", MemoryStatistics::liveBuffers),
            new Figure("segments", "compute_memory_segments", MemoryStatistics::segments),
            new Figure("waitingRequests", "compute_memory_waiting_requests", MemoryStatistics::waitingRequests));

    private record Figure(String field, String series, ToDoubleFunction<MemoryStatistics> of) {}

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ComputeBudgets budgets;

    @TempDir
    Path directory;

    @Test
    void theStatisticsTheEndpointAndTheScrapeAgreeAtRestUnderLoadAndOnceEverythingIsClosed() throws Exception {
        RestClient http = RestClient.create("http://127.0.0.1:" + port);
        MemoryBudget tenant = budgets.budget("tenant").orElseThrow();
        List<UnifiedBuffer> open = new ArrayList<>();
        CountDownLatch viewerMayCallAgain = new CountDownLatch(1);
        try {
            for (int i = 0; i < 6; i++) {
                open.add(manager.allocate(MiB + 100 * i, MemoryLocation.HOST));
                open.add(tenant.allocate(2 * MiB + 7, MemoryLocation.HOST));
                open.add(manager.allocate(64 * 1024 + i, MemoryLocation.DEVICE));
            }
            open.remove(0).close();
            open.remove(4).close();
            open.add(open.getFirst().slice(8, 1024));
            Path file = Files.write(directory.resolve("weights.bin"), new byte[64 * 1024]);
            UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            open.add(mapped);
            open.add(mapped.slice(0, 128));
            UnifiedBuffer viewed = heldByAnIdleViewer(viewerMayCallAgain);
            viewed.close();
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(60 * MiB, MemoryLocation.HOST, Duration.ofMinutes(5));

            MemoryStatistics host = agreeAtRest(http, tenant);
            assertThat(host.heldBuffers()).as("the closed buffer the idle thread's view holds").isEqualTo(1);
            assertThat(host.waitingRequests()).isEqualTo(1);
            assertThat(manager.mappedFileStatistics().openMappings()).isEqualTo(1);

            waiting.cancel(true);
            open.reversed().forEach(UnifiedBuffer::close);
            open.clear();
            viewerMayCallAgain.countDown();
            await().atMost(Duration.ofSeconds(10)).until(() -> manager.statistics(MemoryLocation.HOST).heldBuffers() == 0);
            http.post().uri("/actuator/computememory").body(Map.of("all", true)).retrieve().toBodilessEntity();

            agreeAtRest(http, tenant);
            for (MemoryLocation location : manager.locations()) {
                MemoryStatistics after = manager.statistics(location);
                assertThat(after.liveBuffers() + after.heldBuffers() + after.allocatedBytes() + after.heldBytes() + after.reservedBytes())
                        .as("nothing live, held or reserved at %s once everything is closed and the cache released: %s", location, after).isZero();
            }
        } finally {
            viewerMayCallAgain.countDown();
            open.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A buffer a thread allocated and viewed outside any view scope, the thread then idle until {@code mayCallAgain}:
     * closed elsewhere, its memory waits for that view, held.
     */
    private UnifiedBuffer heldByAnIdleViewer(CountDownLatch mayCallAgain) throws InterruptedException {
        CompletableFuture<UnifiedBuffer> viewed = new CompletableFuture<>();
        Thread.ofPlatform().daemon().name("idle-viewer").start(() -> {
            UnifiedBuffer buffer = manager.allocate(3 * MiB, MemoryLocation.HOST);
            buffer.hostView().fill((byte) 1);
            viewed.complete(buffer);
            try {
                mayCallAgain.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            manager.allocate(16, MemoryLocation.HOST).close(); // calls in again: its views of closed buffers end
        });
        try {
            return viewed.get(10, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError("the viewer did not allocate", e);
        }
    }

    /** Waits until the three agree on every figure (the endpoint and the meters read figures up to a second old); the host's. */
    private MemoryStatistics agreeAtRest(RestClient http, MemoryBudget tenant) {
        await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(300)).untilAsserted(() -> assertThat(disagreements(http, tenant)).isEmpty());
        for (MemoryLocation location : manager.locations()) {
            MemoryStatistics s = manager.statistics(location);
            assertThat(s.requestedBytes()).as("%s", s).isLessThanOrEqualTo(s.allocatedBytes());
            assertThat(s.allocatedBytes() + s.cachedBytes() + s.heldBytes()).as("%s", s).isEqualTo(s.reservedBytes());
            assertThat(s.fragmentation()).isBetween(0.0, 1.0);
        }
        return manager.statistics(MemoryLocation.HOST);
    }

    private List<String> disagreements(RestClient http, MemoryBudget tenant) {
        Map<String, Object> described = http.get().uri("/actuator/computememory/default").retrieve().body(new ParameterizedTypeReference<>() {});
        Map<String, Double> scraped = scrape(http);
        List<String> differ = new ArrayList<>();
        Map<String, Object> locations = map(described.get("locations"));
        for (MemoryLocation location : manager.locations()) {
            MemoryStatistics exact = manager.statistics(location);
            Map<String, Object> summary = map(locations.get(location.name()));
            String labels = "location=\"" + location.name().toLowerCase(Locale.ROOT) + "\"";
            for (Figure figure : FIGURES) {
                compare(differ, location + " " + figure.field(), figure.of().applyAsDouble(exact), summary.get(figure.field()),
                        scraped.get(figure.series() + labels));
            }
        }
        MappedFileStatistics mapped = manager.mappedFileStatistics();
        Map<String, Object> mappedFiles = map(described.get("mappedFiles"));
        compare(differ, "mapped files", mapped.openMappings(), mappedFiles.get("openMappings"), scraped.get("compute_memory_mapped_files"));
        compare(differ, "mapped bytes", mapped.mappedBytes(), mappedFiles.get("mappedBytes"), scraped.get("compute_memory_mapped_bytes"));
        BudgetStatistics budget = tenant.statistics();
        Map<String, Object> listed = ((List<?>) described.get("budgets")).stream().map(FiguresAgreeHttpTests::map)
                .filter(each -> each.get("name").equals("tenant")).findFirst().orElseThrow();
        compare(differ, "budget allocated", budget.allocatedBytes(), listed.get("allocatedBytes"), scraped.get("compute_memory_budget_allocated_bytes"));
        compare(differ, "budget reserved", budget.reservedBytes(), listed.get("reservedBytes"), scraped.get("compute_memory_budget_reserved_bytes"));
        compare(differ, "budget live buffers", budget.liveBuffers(), listed.get("liveBuffers"), scraped.get("compute_memory_budget_live_buffers"));
        return differ;
    }

    private static void compare(List<String> differ, String what, double exact, Object described, Double scraped) {
        if (!(described instanceof Number number) || number.doubleValue() != exact || scraped == null || scraped != exact) {
            differ.add(what + ": statistics " + exact + ", endpoint " + described + ", prometheus " + scraped);
        }
    }

    /** Our samples of the default manager by series and location label ("" for none), leaving out those of other labels. */
    private static Map<String, Double> scrape(RestClient http) {
        Map<String, Double> samples = new HashMap<>();
        http.get().uri("/actuator/prometheus").retrieve().body(String.class).lines().map(SAMPLE::matcher).filter(Matcher::matches).forEach(sample -> {
            Matcher location = Pattern.compile("location=\"[a-z]+\"").matcher(sample.group(2));
            samples.put(sample.group(1) + (location.find() ? location.group() : ""), Double.parseDouble(sample.group(3)));
        });
        return samples;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object json) {
        return (Map<String, Object>) json;
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
