package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.actuate.RecentMemoryStatistics;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/** The sample over real HTTP: its REST API, the computememory endpoint, the compute health contributor and the Prometheus scrape. */
@SampleServiceTest
@SuppressWarnings("unchecked")
class SampleServiceHttpTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Value("${local.server.port}")
    int port;

    private RestClient http;

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port)
                .defaultStatusHandler(status -> true, (request, response) -> {})
                .build();
    }

    @Test
    void vectorMathOnPostedArrays() {
        assertThat(post("/api/math/axpy", "{\"alpha\": 2, \"x\": [1, 2, 3], \"y\": [10, 20, 30]}").getBody())
                .containsEntry("result", List.of(12.0, 24.0, 36.0));
        assertThat(post("/api/math/scale", "{\"alpha\": -0.5, \"x\": [2, 4]}").getBody()).containsEntry("result", List.of(-1.0, -2.0));
        assertThat(post("/api/math/sum", "{\"x\": [0.5, 1.5, 2]}").getBody()).containsEntry("sum", 4.0);
    }

    @Test
    void namedVectorsLiveInComputeMemoryBetweenRequests() {
        assertThat(put("/api/vectors/http-a", "{\"values\": [1, 2, 3, 4]}").getStatusCode().value()).isEqualTo(201);
        assertThat(put("/api/vectors/http-b", "{\"values\": [1, 1, 1, 1]}").getBody()).containsEntry("length", 4);
        assertThat(put("/api/vectors/http-b", "{\"values\": [10, 10, 10, 10]}").getStatusCode().value()).as("replaced").isEqualTo(200);

        assertThat(get("/api/vectors/http-a").getBody()).containsEntry("values", List.of(1.0, 2.0, 3.0, 4.0));
        assertThat(post("/api/vectors/http-a/scale", "{\"alpha\": 3}").getStatusCode().value()).isEqualTo(200);
        assertThat(post("/api/vectors/http-b/axpy", "{\"alpha\": 2, \"x\": \"http-a\"}").getStatusCode().value()).isEqualTo(200);
        assertThat(get("/api/vectors/http-b").getBody()).containsEntry("values", List.of(16.0, 22.0, 28.0, 34.0));
        assertThat(get("/api/vectors/http-b/sum").getBody()).containsEntry("sum", 100.0);
        assertThat(http.get().uri("/api/vectors").retrieve().body(List.class)).extracting(v -> ((Map<String, Object>) v).get("name"))
                .contains("http-a", "http-b");

        assertThat(http.delete().uri("/api/vectors/http-a").retrieve().toBodilessEntity().getStatusCode().value()).isEqualTo(204);
        ResponseEntity<Map<String, Object>> gone = get("/api/vectors/http-a");
        assertThat(gone.getStatusCode().value()).isEqualTo(404);
        assertThat(gone.getBody()).extractingByKey("detail").asString().contains("no vector named 'http-a'");
        http.delete().uri("/api/vectors/http-b").retrieve().toBodilessEntity();
    }

    @Test
    void badRequestsGet400WithAClearMessage() {
        assertBadRequest(post("/api/math/axpy", "{\"alpha\": 1, \"x\": [1, 2], \"y\": [1]}"), "'x' (2 elements) and 'y' (1 elements) differ in length");
        assertBadRequest(post("/api/math/scale", "{\"x\": [1]}"), "'alpha' is required");
        assertBadRequest(post("/api/math/sum", "{\"x\": []}"), "'x' must have 1 to");
        assertBadRequest(post("/api/math/sum", "{\"x\": [1e999]}"), "'x' must hold finite numbers; element 0 is Infinity");
        assertBadRequest(post("/api/math/sum", "{\"x\": [1, \"two\"]}"), "the request body is not the JSON this operation takes");
        assertBadRequest(put("/api/vectors/bad!name", "{\"values\": [1]}"), "vector name 'bad!name' is not allowed");
        // a string is no array, though Jackson's own reading took one for base64-encoded doubles (these bytes are 1.0)
        assertBadRequest(post("/api/math/sum", "{\"x\": \"AAAAAAAA8D8=\"}"), "'x' must be an array of numbers");
        assertBadRequest(put("/api/vectors/bad-type", "{\"values\": {\"0\": 1}}"), "'values' must be an array of numbers");
        for (String nothing : List.of("", "null")) {
            ResponseEntity<Map<String, Object>> response = post("/api/math/axpy", nothing);
            assertBadRequest(response, "the request body is missing: this operation takes JSON (numbers in arrays");
            assertThat(response.getBody()).extractingByKey("detail").asString().as("no handler signature").doesNotContain("dev.compute");
        }
    }

    @Test
    void aNameThatNoVectorCanHaveIsRefusedWithoutRepeatingIt() {
        put("/api/vectors/http-y", "{\"values\": [1]}");
        try {
            String megabyte = "x".repeat(1 << 20);
            ResponseEntity<Map<String, Object>> response = post("/api/vectors/http-y/axpy", "{\"alpha\": 1, \"x\": \"" + megabyte + "\"}");
            assertBadRequest(response, "vector name '" + "x".repeat(64) + "...' (1048576 characters) is not allowed");
            assertThat((String) response.getBody().get("detail")).hasSizeLessThan(300);
            assertThat(get("/api/vectors/http-y").getBody()).containsEntry("values", List.of(1.0));
        } finally {
            http.delete().uri("/api/vectors/http-y").retrieve().toBodilessEntity();
        }
    }

    @Test
    void anArrayPastTheLongestVectorIsRefusedOnceItIsPastNotAfterTheWholeBodyIsRead() throws Exception {
        // twice the longest vector, 64 MiB of "1,": read whole, such a body filled the heap before its length was checked
        long numbers = 2L * VectorStore.MAX_LENGTH;
        byte[] prefix = "{\"x\": [".getBytes(StandardCharsets.US_ASCII);
        byte[] ones = "1,".repeat(32 * 1024).getBytes(StandardCharsets.US_ASCII);
        byte[] suffix = "1]}".getBytes(StandardCharsets.US_ASCII);
        long bodyBytes = prefix.length + 2 * (numbers - 1) + suffix.length;
        AtomicLong sent = new AtomicLong();
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout((int) Duration.ofMinutes(2).toMillis());
            Thread writer = Thread.ofPlatform().daemon().start(() -> {
                try {
                    OutputStream out = socket.getOutputStream();
                    out.write(("POST /api/math/sum HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
                            + "Content-Length: " + bodyBytes + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                    out.write(prefix);
                    sent.addAndGet(prefix.length);
                    for (long left = numbers - 1; left > 0; left -= ones.length / 2) {
                        int bytes = (int) Math.min(ones.length, 2 * left);
                        out.write(ones, 0, bytes);
                        sent.addAndGet(bytes);
                    }
                    out.write(suffix);
                    sent.addAndGet(suffix.length);
                } catch (IOException e) {
                    // the server answered and closed the connection: what this test expects
                }
            });
            String response = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            writer.join(Duration.ofMinutes(1));

            assertThat(response).startsWith("HTTP/1.1 400 ").contains("'x' must have 1 to " + VectorStore.MAX_LENGTH + " elements, not more");
            assertThat(sent.get()).as("body bytes sent before the server stopped reading, of " + bodyBytes).isLessThan(bodyBytes);
        }
    }

    @Test
    void dotSegmentsAreNoVectorNamesSinceClientsDropThemFromTheirUrls() {
        // curl and browsers turn /api/vectors/. into /api/vectors/: a vector so named could be listed but not read or deleted
        for (String name : List.of("%2E", "%2E%2E")) {
            ResponseEntity<Map<String, Object>> response = http.put().uri(URI.create("http://127.0.0.1:" + port + "/api/vectors/" + name))
                    .contentType(MediaType.APPLICATION_JSON).body("{\"values\": [1]}").retrieve().toEntity(JSON);
            assertBadRequest(response, "is not allowed");
        }
        assertThat(http.get().uri("/api/vectors").retrieve().body(List.class)).extracting(v -> ((Map<String, Object>) v).get("name"))
                .doesNotContain(".", "..");
        assertThat(put("/api/vectors/...", "{\"values\": [1]}").getStatusCode().value()).as("three dots are a name").isEqualTo(201);
        http.delete().uri("/api/vectors/...").retrieve().toBodilessEntity();
    }

    @Test
    void theComputeMemoryEndpointShowsThePoolAndTrimsIt() throws InterruptedException {
        put("/api/vectors/http-endpoint", "{\"values\": [1, 2, 3]}");
        long stored = System.nanoTime();
        try {
            Map<String, Object> summary = get("/actuator/computememory").getBody();
            assertThat(summary).containsKeys("backend", "device", "defaultLocation", "locations", "definitions");
            String location = (String) summary.get("defaultLocation");
            Map<String, Object> figures = (Map<String, Object>) ((Map<String, Object>) summary.get("locations")).get(location);
            assertThat(figures).containsKeys("liveBuffers", "allocatedBytes", "reservedBytes", "cachedBytes", "reservedBytesPeak",
                    "hitRate", "fragmentation", "overhead", "counts", "copiedBytes");
            // the figures are at most a second old: a read asked for more than a second after the vector was stored
            // shows it, however long a loaded machine takes to answer (the answer is not timed)
            for (long live = 0; live == 0; ) {
                boolean overASecondAfter = System.nanoTime() - stored > RecentMemoryStatistics.MAX_AGE.toNanos();
                live = ((Number) ((Map<String, Object>) ((Map<String, Object>) get("/actuator/computememory").getBody().get("locations"))
                        .get(location)).get("liveBuffers")).longValue();
                if (overASecondAfter) {
                    assertThat(live).as("live buffers, asked over a second after the vector was stored").isPositive();
                } else if (live == 0) {
                    Thread.sleep(100);
                }
            }

            Map<String, Object> detail = get("/actuator/computememory/" + location.toLowerCase()).getBody();
            assertThat(detail).containsEntry("location", location).containsKeys("summary", "segments", "timeline");
            assertThat((List<?>) detail.get("segments")).flatExtracting(s -> (List<?>) ((Map<String, Object>) s).get("blocks"))
                    .anySatisfy(b -> assertThat((Map<String, Object>) b).containsEntry("state", "LIVE").containsEntry("requestedBytes", 24)
                            .extractingByKey("allocationSite").asString().contains("VectorStore"));

            assertThat(get("/actuator/computememory/nowhere").getStatusCode().value()).as("no manager or location of that name").isEqualTo(404);

            ResponseEntity<Map<String, Object>> trimmed = post("/actuator/computememory", "{\"all\": true}");
            assertThat(trimmed.getStatusCode().value()).isEqualTo(200);
            assertThat(trimmed.getBody()).containsEntry("released", "all").containsKeys("releasedBytes", "managers");
        } finally {
            http.delete().uri("/api/vectors/http-endpoint").retrieve().toBodilessEntity();
        }
    }

    @Test
    void healthReportsTheComputeContributorUpWithDetails() {
        Map<String, Object> health = get("/actuator/health/compute").getBody();
        assertThat(health).containsEntry("status", "UP");
        assertThat((Map<String, Object>) health.get("details")).containsKeys("backend", "device", "locations");
    }

    @Test
    void prometheusScrapeCarriesOurSeriesWithUnits() {
        String scrape = http.get().uri("/actuator/prometheus").retrieve().body(String.class);
        assertThat(scrape).containsPattern("compute_memory_reserved_bytes\\{backend=\"\\w+\",device=\"0\",location=\"host\",name=\"default\"\\}")
                .contains("compute_memory_allocated_peak_bytes{").contains("compute_memory_fragmentation_ratio{")
                .contains("compute_memory_pool_hits_total{").contains("compute_memory_copied_bytes_total{");
    }

    @Test
    void theLoadGeneratorStartsMovesThePoolAndStopsFreeingItsBuffers() {
        assertThat(post("/api/load/start", "").getBody()).containsEntry("running", true);
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100)).untilAsserted(() -> assertThat(
                ((Number) get("/api/load").getBody().get("operations")).longValue()).as("operations").isGreaterThanOrEqualTo(50));
        Map<String, Object> stopped = post("/api/load/stop", "").getBody();
        assertThat(stopped).containsEntry("running", false).containsEntry("liveBuffers", 0);
    }

    @Test
    void theLoadGeneratorsSwitchesTakeJsonOnlySoNoOtherSiteCanPressThem() {
        for (String path : List.of("/api/load/start", "/api/load/stop")) {
            ResponseEntity<Map<String, Object>> bare = http.post().uri(path).retrieve().toEntity(JSON);
            ResponseEntity<Map<String, Object>> form = http.post().uri(path).contentType(MediaType.APPLICATION_FORM_URLENCODED)
                    .body("start=1").retrieve().toEntity(JSON);
            ResponseEntity<Map<String, Object>> text = http.post().uri(path).contentType(MediaType.TEXT_PLAIN).body("{}").retrieve().toEntity(JSON);
            assertThat(List.of(bare, form, text)).allSatisfy(response -> assertProblem(response, 415));
            assertThat(text.getHeaders().getAccept()).containsExactly(MediaType.APPLICATION_JSON);
        }
        assertThat(get("/api/load").getBody()).containsEntry("running", false);
    }

    @Test
    void unknownPathsAndMethodsAnswerProblemDetailsAsTheApiDoes() {
        ResponseEntity<Map<String, Object>> unknown = get("/api/nothing-here");
        assertProblem(unknown, 404);
        assertThat(unknown.getBody()).containsEntry("instance", "/api/nothing-here");

        ResponseEntity<Map<String, Object>> wrongMethod = http.delete().uri("/api/math/sum").retrieve().toEntity(JSON);
        assertProblem(wrongMethod, 405);
        assertThat(wrongMethod.getHeaders().getAllow()).containsExactly(HttpMethod.POST);
    }

    @Test
    void allocationSitesInTheEndpointAreTheApplicationsFramesGroupedByCallSite() {
        List<String> names = IntStream.range(0, 40).mapToObj(i -> "http-site-" + i).toList();
        names.forEach(name -> put("/api/vectors/" + name, "{\"values\": [1, 2, 3, 4, 5, 6, 7]}"));
        try {
            Map<String, Object> summary = get("/actuator/computememory").getBody();
            List<Map<String, Object>> open = (List<Map<String, Object>>) ((Map<String, Object>) summary.get("leaks")).get("openBuffers");
            assertThat(open).hasSizeLessThanOrEqualTo(10).filteredOn(site -> ((String) site.get("allocationSite")).contains("VectorStore.put"))
                    .as("one entry for the call site of all 40").singleElement()
                    .satisfies(site -> assertThat(((Number) site.get("buffers")).longValue()).isGreaterThanOrEqualTo(40));

            String location = ((String) summary.get("defaultLocation")).toLowerCase();
            List<String> sites = ((List<Map<String, Object>>) get("/actuator/computememory/" + location).getBody().get("segments")).stream()
                    .flatMap(segment -> ((List<Map<String, Object>>) segment.get("blocks")).stream())
                    .map(block -> (String) block.get("allocationSite"))
                    .filter(site -> site != null && site.contains("VectorStore.put")).toList();
            assertThat(sites).hasSizeGreaterThanOrEqualTo(40).allSatisfy(site -> assertThat(site)
                    .startsWith("\tat dev.compute.sample.VectorStore.put(").contains("\tat dev.compute.sample.VectorController.put(")
                    .doesNotContain("org.apache.catalina").containsPattern("\t\\.\\.\\. \\d+ more\n$"));
        } finally {
            names.forEach(name -> http.delete().uri("/api/vectors/" + name).retrieve().toBodilessEntity());
        }
    }

    private static void assertProblem(ResponseEntity<Map<String, Object>> response, int status) {
        assertThat(response.getStatusCode().value()).isEqualTo(status);
        assertThat(response.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_PROBLEM_JSON);
        assertThat(response.getBody()).containsEntry("status", status).containsKey("detail");
    }

    private static void assertBadRequest(ResponseEntity<Map<String, Object>> response, String message) {
        assertThat(response.getStatusCode().value()).isEqualTo(400);
        assertThat(response.getBody()).extractingByKey("detail").asString().contains(message);
    }

    private ResponseEntity<Map<String, Object>> get(String path) {
        return http.get().uri(path).retrieve().toEntity(JSON);
    }

    private ResponseEntity<Map<String, Object>> post(String path, String json) {
        return http.post().uri(path).contentType(MediaType.APPLICATION_JSON).body(json).retrieve().toEntity(JSON);
    }

    private ResponseEntity<Map<String, Object>> put(String path, String json) {
        return http.put().uri(path).contentType(MediaType.APPLICATION_JSON).body(json).retrieve().toEntity(JSON);
    }
}
