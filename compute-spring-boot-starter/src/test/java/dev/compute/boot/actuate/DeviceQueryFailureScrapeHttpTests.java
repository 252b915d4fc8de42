package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.FaultInjectingBackend;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/**
 * A backend whose driver fails to say how much device memory there is (health's "backend fails to answer") over a real
 * Prometheus scrape and the endpoint: the scrape of the whole application still answers, the device meters have no
 * value, and the pool's own figures, which need no driver, are still there; the endpoint says the device's free memory
 * is unknown (-1, as a backend that cannot tell says).
 */
@SpringBootTest(classes = DeviceQueryFailureScrapeHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=prometheus,computememory", "compute.memory.timeline.interval=0"})
class DeviceQueryFailureScrapeHttpTests {

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    FaultInjectingBackend backend;

    @AfterEach
    void answerAgain() {
        backend.failMemoryInfo(false);
    }

    @Test
    void aDeviceThatFailsToAnswerLeavesTheScrapeAndThePoolsFiguresStanding() {
        RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {})
                .build();
        try (UnifiedBuffer held = manager.allocate(1 << 20, MemoryLocation.DEVICE)) {
            backend.failMemoryInfo(true);

            ResponseEntity<String> scrape = http.get().uri("/actuator/prometheus").retrieve().toEntity(String.class);

            assertThat(scrape.getStatusCode()).as("one driver's failure does not take every meter of the application down").isEqualTo(HttpStatus.OK);
            assertThat(scrape.getBody()).contains("jvm_")
                    .contains("compute_device_memory_free_bytes{backend=\"simulated\",device=\"0\",name=\"gpu\"} NaN")
                    .contains("compute_memory_allocated_bytes{backend=\"simulated\",device=\"0\",location=\"device\",name=\"gpu\"} "
                            + (double) manager.statistics(MemoryLocation.DEVICE).allocatedBytes());
        }
    }

    @Test
    void theEndpointStillDescribesTheManagerWithTheDevicesFreeMemoryUnknown() {
        RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {})
                .build();
        try (UnifiedBuffer held = manager.allocate(1 << 20, MemoryLocation.DEVICE)) {
            backend.failMemoryInfo(true);

            ResponseEntity<String> described = http.get().uri("/actuator/computememory/gpu").retrieve().toEntity(String.class);

            assertThat(described.getStatusCode()).as("the pool's figures need no driver").isEqualTo(HttpStatus.OK);
            assertThat(described.getBody()).contains("\"freeBytes\":-1").contains("\"liveBuffers\":1");
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {

        @Bean
        FaultInjectingBackend faultInjectingBackend() {
            return new FaultInjectingBackend(new SimulatedDiscreteBackend(), 1);
        }

        /** The application's own manager on that backend, observed as {@code gpu}. */
        @Bean(destroyMethod = "close")
        UnifiedMemoryManager gpuUnifiedMemoryManager(FaultInjectingBackend backend) {
            return UnifiedMemoryManager.builder().backend(backend).name("gpu").build();
        }
    }
}
