package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/**
 * The sample with two managers from {@code compute.managers.*}, the CPU and OpenCL (PoCL in CI, which installs it and
 * sets {@code CI}; elsewhere the test skips without a platform), each observed by its name: in the endpoint, in the
 * health contributor, in a real Prometheus scraping the sample, and on the memory map page in a real Chromium.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "compute.managers.cpu.backend=cpu", "compute.managers.gpu.backend=opencl", "compute.primary=cpu",
        "compute.memory.leak-detection=paranoid", "compute.memory.timeline.interval=1s"})
class TwoManagersTests {

    /** An odd size, to find this test's block among whatever else the managers hold. */
    private static final long BUFFER_BYTES = 3L * 1024 * 1024 + 4321;

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Value("${local.server.port}")
    int port;

    @Autowired
    @Qualifier("gpu")
    UnifiedMemoryManager gpu;

    @Autowired
    UnifiedMemoryManager primary;

    private RestClient http;

    /** Before the application starts: without an OpenCL platform it could not, so the test skips (or fails in CI) with the reason. */
    @BeforeAll
    static void openClIsHere() {
        OpenClTestManagers.openClManager().close();
    }

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
    }

    private ResponseEntity<Map<String, Object>> get(String path) {
        return http.get().uri(path).retrieve().toEntity(JSON);
    }

    @Test
    void theEndpointListsBothManagersAndShowsEachOnesBlocks() {
        assertThat(primary.backendInfo().backend()).as("compute.primary").isEqualTo("cpu");
        Map<String, Object> listing = get("/actuator/computememory").getBody();
        assertThat(map(listing.get("managers"))).containsOnlyKeys("cpu", "gpu");
        assertThat(map(map(listing.get("managers")).get("gpu"))).containsEntry("backend", "opencl").containsEntry("primary", false);
        assertThat(listing).containsEntry("primary", "cpu").containsEntry("backend", "cpu");

        assertThat(map(get("/actuator/computememory/gpu").getBody().get("settings"))).containsEntry("backend", "opencl")
                .containsEntry("leakDetection", "PARANOID");
        try (UnifiedBuffer buffer = gpu.allocate(BUFFER_BYTES, MemoryLocation.DEVICE)) {
            Map<String, Object> device = get("/actuator/computememory/gpu/device").getBody();
            assertThat(device).containsEntry("manager", "gpu").containsEntry("location", "DEVICE");
            assertThat((List<?>) device.get("segments")).flatExtracting(segment -> (List<?>) map(segment).get("blocks"))
                    .anySatisfy(block -> assertThat(map(block)).containsEntry("state", "LIVE").containsEntry("requestedBytes", (int) BUFFER_BYTES)
                            .extractingByKey("allocationSite").asString().contains("TwoManagersTests"));
        }
        assertThat(get("/actuator/computememory/tpu").getStatusCode().value()).as("no manager of that name").isEqualTo(404);
        assertThat(get("/actuator/computememory/tpu/device").getStatusCode().value()).isEqualTo(404);
    }

    @Test
    void healthHasAnEntryForEachManager() {
        Map<String, Object> compute = get("/actuator/health/compute").getBody();
        assertThat(compute).containsEntry("status", "UP");
        assertThat(map(compute.get("components"))).containsOnlyKeys("cpu", "gpu");
        assertThat(map(get("/actuator/health/compute/gpu").getBody().get("details"))).containsEntry("backend", "opencl");
    }

    @Test
    void prometheusScrapesTheSeriesOfEachManagerByName(@TempDir Path workDir) throws Exception {
        try (PrometheusServer prometheus = PrometheusServer.scraping(port, "/actuator/prometheus", workDir)) {
            String gpuSeries = prometheus.queryUntil("compute_memory_reserved_bytes{name=\"gpu\",location=\"device\"}",
                    body -> body.contains("\"name\":\"gpu\""), Duration.ofSeconds(30));
            assertThat(gpuSeries).contains("\"backend\":\"opencl\"").contains("\"location\":\"device\"");
            assertThat(prometheus.queryUntil("compute_memory_reserved_bytes{name=\"cpu\",location=\"host\"}",
                    body -> body.contains("\"name\":\"cpu\""), Duration.ofSeconds(5))).contains("\"backend\":\"cpu\"");
            assertThat(prometheus.queryUntil("compute_device_memory_total_bytes", body -> body.contains("\"name\":\"gpu\"")
                    && body.contains("\"name\":\"cpu\""), Duration.ofSeconds(5))).contains("\"name\":\"gpu\"").contains("\"name\":\"cpu\"");
            assertThat(prometheus.queryUntil("count by (name) (compute_memory_allocation_failures_total)",
                    body -> body.contains("\"name\":\"gpu\""), Duration.ofSeconds(5))).contains("\"name\":\"cpu\"");
        }
    }

    @Test
    void thePageDrawsBothManagersEachBlockUnderItsOwn(@TempDir Path profile) throws Exception {
        ChromeDriver browser = HeadlessChromium.start(profile, 1280, 1400);
        try (UnifiedBuffer buffer = gpu.allocate(BUFFER_BYTES, MemoryLocation.DEVICE)) {
            WebDriverWait wait = new WebDriverWait(browser, Duration.ofSeconds(20), Duration.ofMillis(200));
            wait.ignoring(StaleElementReferenceException.class);
            browser.get("http://127.0.0.1:" + port + "/actuator/computememorymap");
            wait.until(d -> d.findElement(By.id("device")).getText().startsWith("2 managers"));
            assertThat(browser.findElement(By.id("device")).getText()).isEqualTo("2 managers: cpu (cpu), gpu (opencl)");
            assertThat(browser.findElements(By.cssSelector("section.manager"))).extracting(s -> s.getDomAttribute("data-manager"))
                    .containsExactly("cpu", "gpu");
            assertThat(browser.findElements(By.cssSelector("section.manager[data-manager=gpu] section.location")))
                    .extracting(s -> s.getDomAttribute("data-location"))
                    .containsExactlyElementsOf(gpu.locations().stream().map(Enum::name).toList());

            String ours = ".block[data-state=LIVE][data-requested=\"" + BUFFER_BYTES + "\"]";
            WebElement block = wait.until(d -> d.findElement(By.cssSelector("section.manager[data-manager=gpu] section[data-location=DEVICE] " + ours)));
            assertThat(block.getDomAttribute("data-manager")).isEqualTo("gpu");
            assertThat(browser.findElements(By.cssSelector("section.manager[data-manager=cpu] " + ours))).as("not under the other manager").isEmpty();
            assertThat(browser.findElement(By.cssSelector("section.manager[data-manager=gpu] .manager-title")).getText())
                    .contains("backend opencl").contains("leaks detected");

            Path target = Path.of("target", "memory-map-two-managers.png");
            Files.createDirectories(target.getParent());
            Files.copy(browser.getScreenshotAs(OutputType.FILE).toPath(), target, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            browser.quit();
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object value) {
        return (Map<String, Object>) value;
    }
}
