package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;
import tools.jackson.databind.json.JsonMapper;

/**
 * Two managers from compute.managers.* in a real web application, over real HTTP: the endpoint lists and selects
 * them by name (an unknown name is a 404), health has one entry each, every meter in the Prometheus scrape carries
 * the manager's name, and the page is served. The application's spring.jackson.* settings do not reshape the
 * endpoint's JSON, which the page reads.
 */
@SpringBootTest(classes = SeveralManagersHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "compute.managers.cpu.backend=cpu", "compute.managers.small.backend=cpu",
        "compute.managers.small.memory.pooling.max-pool-size=64MB", "compute.memory.timeline.interval=0",
        "management.endpoints.web.exposure.include=health,computememory,computememorymap,prometheus",
        "management.endpoint.computememory.access=unrestricted", "management.endpoint.health.show-details=always",
        "spring.jackson.property-naming-strategy=SNAKE_CASE"})
class SeveralManagersHttpTests {

    @LocalServerPort
    int port;

    @Autowired
    @Qualifier("small")
    UnifiedMemoryManager small;

    @Autowired
    JsonMapper applicationMapper;

    RestClient http;

    record Figures(long liveBuffers) {}

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
    }

    private ResponseEntity<Map<String, Object>> get(String path) {
        return http.get().uri(path).retrieve().toEntity(new ParameterizedTypeReference<>() {});
    }

    private int status(String path) {
        return http.get().uri(path).retrieve().toBodilessEntity().getStatusCode().value();
    }

    @Test
    void theEndpointListsTheManagersAndSelectsEachByName() {
        assertThat(applicationMapper.writeValueAsString(new Figures(1))).as("the application's own JSON is snake case").contains("live_buffers");
        Map<String, Object> listing = get("/actuator/computememory").getBody();
        assertThat(map(listing.get("managers"))).containsOnlyKeys("cpu", "small");
        assertThat(listing).containsEntry("primary", "cpu").containsKeys("locations", "leaks", "defaultLocation");
        assertThat(map(map(listing.get("locations")).get("HOST"))).as("the app's SNAKE_CASE does not reach the endpoint's JSON")
                .containsKeys("liveBuffers", "reservedBytes").doesNotContainKey("live_buffers");

        Map<String, Object> manager = get("/actuator/computememory/small").getBody();
        assertThat(manager).containsEntry("name", "small").containsEntry("primary", false).containsEntry("backend", "cpu");
        assertThat(map(manager.get("settings"))).containsEntry("maxPoolSizeBytes", 64 << 20).containsEntry("backend", "cpu");

        try (UnifiedBuffer buffer = small.allocate(1 << 20, MemoryLocation.HOST)) {
            Map<String, Object> host = get("/actuator/computememory/small/host").getBody();
            assertThat(host).containsEntry("manager", "small").containsEntry("location", "HOST");
            assertThat((List<?>) host.get("segments")).isNotEmpty();
        }
        assertThat(get("/actuator/computememory/host").getBody()).as("a location of the primary, as before there were several")
                .containsEntry("manager", "cpu").containsEntry("location", "HOST");
    }

    @Test
    void anUnknownManagerOrLocationOrANonLocationIsNotFoundAndTrimmingAnUnknownManagerIsABadRequest() {
        assertThat(status("/actuator/computememory/tpu")).isEqualTo(404);
        assertThat(status("/actuator/computememory/tpu/host")).isEqualTo(404);
        assertThat(status("/actuator/computememory/small/nowhere")).as("a path, as /nowhere is").isEqualTo(404);
        assertThat(http.post().uri("/actuator/computememory").contentType(MediaType.APPLICATION_JSON).body("{\"name\": \"tpu\"}")
                .retrieve().toBodilessEntity().getStatusCode().value()).isEqualTo(400);
    }

    /**
     * A name no manager has, or a location its manager does not have, was a 404 with an empty body, as a path no
     * endpoint has: the caller could not tell a wrong name from an endpoint that is not exposed. The 404 says which,
     * and lists the managers; so does the 400 of a trim of a manager not there, whose reason Spring Boot's error
     * page left out.
     */
    @Test
    void aNotFoundSaysWhatIsNotThereAndNamesTheManagers() {
        ResponseEntity<Map<String, Object>> manager = get("/actuator/computememory/tpu");
        assertThat(manager.getStatusCode().value()).isEqualTo(404);
        assertThat(manager.getBody()).containsEntry("managers", List.of("cpu", "small"));
        assertThat((String) manager.getBody().get("message")).contains("no compute memory manager named 'tpu'")
                .contains("managers: cpu, small").contains("device, host, pinned, unified");

        ResponseEntity<Map<String, Object>> ofLocation = get("/actuator/computememory/tpu/host");
        assertThat(ofLocation.getStatusCode().value()).isEqualTo(404);
        assertThat((String) ofLocation.getBody().get("message")).contains("no compute memory manager named 'tpu'").contains("managers: cpu, small");

        ResponseEntity<Map<String, Object>> location = get("/actuator/computememory/small/nowhere");
        assertThat(location.getStatusCode().value()).isEqualTo(404);
        assertThat((String) location.getBody().get("message")).contains("manager 'small' has no location 'nowhere'")
                .contains("device, host, pinned, unified");

        ResponseEntity<Map<String, Object>> trim = http.post().uri("/actuator/computememory").contentType(MediaType.APPLICATION_JSON)
                .body("{\"name\": \"tpu\"}").retrieve().toEntity(new ParameterizedTypeReference<>() {});
        assertThat(trim.getStatusCode().value()).as("a bad request, as before").isEqualTo(400);
        assertThat(trim.getBody()).containsEntry("managers", List.of("cpu", "small"));
        assertThat((String) trim.getBody().get("message")).contains("no compute memory manager named 'tpu'");
    }

    @Test
    void oneManagerIsTrimmedByName() {
        small.allocate(1 << 20, MemoryLocation.HOST).close();
        ResponseEntity<Map<String, Object>> trimmed = http.post().uri("/actuator/computememory").contentType(MediaType.APPLICATION_JSON)
                .body("{\"name\": \"small\", \"all\": true}").retrieve().toEntity(new ParameterizedTypeReference<>() {});
        assertThat(trimmed.getStatusCode().value()).isEqualTo(200);
        assertThat(map(trimmed.getBody().get("managers"))).containsOnlyKeys("small");
        assertThat(small.statistics(MemoryLocation.HOST).reservedBytes()).isZero();
    }

    @Test
    void oneManagerIsCompactedByNameAndEachLocationReported() {
        UnifiedBuffer kept = small.allocate(3 << 20, MemoryLocation.HOST);
        UnifiedBuffer dropped = small.allocate(3 << 20, MemoryLocation.HOST);
        UnifiedBuffer last = small.allocate(3 << 20, MemoryLocation.HOST);
        last.copyFrom(new byte[] {42});
        dropped.close();
        ResponseEntity<Map<String, Object>> compacted = http.post().uri("/actuator/computememory").contentType(MediaType.APPLICATION_JSON)
                .body("{\"name\": \"small\", \"compact\": true, \"all\": true}").retrieve().toEntity(new ParameterizedTypeReference<>() {});

        assertThat(compacted.getStatusCode().value()).isEqualTo(200);
        assertThat(compacted.getBody()).containsEntry("released", "all");
        Map<String, Object> manager = map(map(compacted.getBody().get("managers")).get("small"));
        Map<String, Object> host = map(map(manager.get("locations")).get("HOST"));
        assertThat(host).containsEntry("buffersMoved", 1).containsEntry("bytesMoved", 3 << 20).containsEntry("buffersInUse", 0)
                .containsKeys("fragmentationBefore", "fragmentationAfter", "largestFreeBlockBytesBefore", "durationMillis");
        byte[] read = new byte[1];
        last.copyTo(read);
        assertThat(read[0]).isEqualTo((byte) 42);
        kept.close();
        last.close();
    }

    @Test
    void healthHasAnEntryForEachManager() {
        Map<String, Object> compute = get("/actuator/health/compute").getBody();
        assertThat(compute).containsEntry("status", "UP");
        assertThat(map(compute.get("components"))).containsOnlyKeys("cpu", "small");
        Map<String, Object> small = get("/actuator/health/compute/small").getBody();
        assertThat(small).containsEntry("status", "UP");
        assertThat(map(small.get("details"))).containsEntry("backend", "cpu");
    }

    @Test
    void everyMeterInTheScrapeCarriesItsManagersName() {
        String scrape = http.get().uri("/actuator/prometheus").retrieve().body(String.class);
        assertThat(scrape).contains("compute_memory_cap_bytes{backend=\"cpu\",device=\"0\",location=\"host\",name=\"small\"} 6.7108864E7")
                .contains("compute_memory_cap_bytes{backend=\"cpu\",device=\"0\",location=\"host\",name=\"cpu\"} 4.294967296E9")
                .contains("compute_device_memory_total_bytes{backend=\"cpu\",device=\"0\",name=\"small\"}")
                .contains("compute_memory_allocation_failures_total{backend=\"cpu\",device=\"0\",location=\"host\",name=\"small\",reason=\"pool-limit\"}")
                .contains("compute_memory_backend_allocate_seconds_count{backend=\"cpu\",device=\"0\",location=\"host\",name=\"cpu\"}");
        assertThat(scrape.lines().filter(line -> line.startsWith("compute_")))
                .allSatisfy(line -> assertThat(line).containsAnyOf("name=\"cpu\"", "name=\"small\""));
    }

    @Test
    void thePageIsServedAsAnEndpoint() {
        ResponseEntity<String> page = http.get().uri("/actuator/computememorymap").accept(MediaType.TEXT_HTML).retrieve().toEntity(String.class);
        assertThat(page.getStatusCode().value()).isEqualTo(200);
        assertThat(page.getHeaders().getContentType()).hasToString("text/html;charset=UTF-8");
        assertThat(page.getBody()).contains("<title>Compute memory map</title>").contains("findEndpoint");
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object value) {
        return (Map<String, Object>) value;
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
