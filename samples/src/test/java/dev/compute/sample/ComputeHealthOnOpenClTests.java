package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.web.client.RestClient;

/**
 * OpenCL reports no free device memory (PoCL here): health leaves the figure out and says so, where it showed
 * {@code freeBytes: -1}, and the scrape has no negative sample of it.
 */
class ComputeHealthOnOpenClTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Test
    @SuppressWarnings("unchecked")
    void freeDeviceMemoryOpenClCannotTellIsUnknownNotNegative() {
        OpenClTestManagers.openClManager().close(); // skips without an OpenCL device, as the kernel's tests do
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(SampleApplication.class).run("--server.port=0",
                "--compute.backend=opencl", "--compute.memory.timeline.interval=0")) {
            RestClient http = RestClient.create("http://127.0.0.1:" + context.getEnvironment().getProperty("local.server.port"));

            Map<String, Object> health = http.get().uri("/actuator/health/compute").retrieve().body(JSON);
            Map<String, Object> device = (Map<String, Object>) ((Map<String, Object>) health.get("details")).get("device");
            assertThat(device).doesNotContainKey("freeBytes").doesNotContainKey("usedRatio")
                    .containsEntry("memoryUnknown", "the opencl backend does not report the device's free memory")
                    .extractingByKey("totalBytes").satisfies(total -> assertThat(((Number) total).longValue()).isPositive());

            String scrape = http.get().uri("/actuator/prometheus").retrieve().body(String.class);
            assertThat(scrape.lines().filter(line -> line.startsWith("compute_device_memory_free_bytes{")))
                    .allSatisfy(line -> assertThat(line).endsWith(" NaN"));
        }
    }
}
