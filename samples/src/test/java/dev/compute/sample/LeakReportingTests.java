package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.web.client.RestClient;

/**
 * A buffer dropped without close() in the running sample (leak detection paranoid, as {@link SampleServiceTest}
 * sets it): while open the endpoint lists it by allocation site; once collected the log has the LEAK line with
 * that site, and the endpoint's summary and the Prometheus scrape count it.
 */
@SampleServiceTest
@ExtendWith(OutputCaptureExtension.class)
@SuppressWarnings("unchecked")
class LeakReportingTests {

    // An odd size, to find this buffer among whatever else the service holds.
    private static final long LEAKED_BYTES = 12_345;

    @Autowired
    UnifiedMemoryManager manager;

    @Value("${local.server.port}")
    int port;

    @Test
    void aBufferDroppedWithoutCloseIsLoggedWithItsSiteAndShownByTheEndpoint(CapturedOutput output) {
        RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).build();
        MemoryLocation location = manager.defaultLocation();
        long before = manager.leaksDetected();

        allocateAndForget();
        Map<String, Object> open = (Map<String, Object>) summary(http).get("leaks");
        assertThat((List<Map<String, Object>>) open.get("openBuffers")).anySatisfy(site -> assertThat(site)
                .containsEntry("location", location.name()).containsEntry("requestedBytes", (int) LEAKED_BYTES)
                .extractingByKey("allocationSite").asString().contains("LeakReportingTests.allocateAndForget"));

        forgotten = null;

        // a collection and the Cleaner's thread, neither bound in time on a loaded machine
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(10)).untilAsserted(() -> {
            System.gc();
            assertThat(manager.leaksDetected()).as("the Cleaner found the dropped buffer").isGreaterThan(before);
        });

        assertThat(output).contains("LEAK: a UnifiedBuffer of " + LEAKED_BYTES + " bytes at " + location
                + " was garbage-collected without close(); its memory goes back to the pool now, or as the views and accesses"
                + " still open on it end. It was allocated at:")
                .containsPattern("at dev\\.compute\\.sample\\.LeakReportingTests\\.allocateAndForget\\(LeakReportingTests\\.java:\\d+\\)");
        Map<String, Object> leaks = (Map<String, Object>) summary(http).get("leaks");
        assertThat(((Number) leaks.get("detected")).longValue()).isGreaterThan(before);
        assertThat((List<Map<String, Object>>) leaks.get("openBuffers")).as("its memory went back to the pool")
                .noneSatisfy(site -> assertThat(site.get("allocationSite")).asString().contains("allocateAndForget"));
        assertThat(http.get().uri("/actuator/prometheus").retrieve().body(String.class))
                .containsPattern("compute_memory_leaks_total\\{backend=\"\\w+\",device=\"0\",name=\"default\"\\} [1-9]");
    }

    /** Reachable from this field until the test drops it, so the endpoint sees it open first. */
    private @Nullable UnifiedBuffer forgotten;

    private void allocateAndForget() {
        forgotten = manager.allocate(LEAKED_BYTES);
        forgotten.copyFrom(new byte[(int) LEAKED_BYTES]);
    }

    private static Map<String, Object> summary(RestClient http) {
        return http.get().uri("/actuator/computememory").retrieve().body(new ParameterizedTypeReference<Map<String, Object>>() {});
    }
}
