package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.web.client.RestClient;

/**
 * The load generator on a device whose ops wait for the device (OpenCL here, PoCL in CI; CUDA alike): stopping it
 * interrupts its thread, mostly in such a wait, which gives up with a {@code DeviceWaitInterruptedException}. That is
 * the stop asked for, not an error, so neither {@code POST /api/load/stop} nor the service's shutdown logs one.
 */
@ExtendWith(OutputCaptureExtension.class)
class LoadGeneratorOnOpenClTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Test
    void stoppingTheLoadOverHttpOrByShutdownLogsNoError(CapturedOutput output) {
        OpenClTestManagers.openClManager().close(); // skips without an OpenCL device, as the kernel's tests do
        // no pause and large buffers: the generator's thread spends its time in ops, waiting for the device
        // arguments, not the builder's properties, which are defaults that the sample's application.yml overrides
        ConfigurableApplicationContext context = new SpringApplicationBuilder(SampleApplication.class).run("--server.port=0",
                "--compute.backend=opencl", "--sample.load.pause=0ms", "--sample.load.max-buffer-size=64MB",
                "--sample.load.max-live-buffers=4", "--compute.memory.timeline.interval=0");
        try {
            RestClient http = RestClient.create("http://127.0.0.1:" + context.getEnvironment().getProperty("local.server.port"));
            for (int round = 0; round < 5; round++) {
                long before = operations(http.post().uri("/api/load/start").contentType(MediaType.APPLICATION_JSON).retrieve().body(JSON));
                await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(1))
                        .until(() -> operations(http.get().uri("/api/load").retrieve().body(JSON)) > before && waitingForTheDevice());
                assertThat(http.post().uri("/api/load/stop").contentType(MediaType.APPLICATION_JSON).retrieve().body(JSON))
                        .containsEntry("running", false).containsEntry("liveBuffers", 0);
            }
            http.post().uri("/api/load/start").contentType(MediaType.APPLICATION_JSON).retrieve().toBodilessEntity();
        } finally {
            context.close();
        }
        assertThat(output).contains("load generator stopped after").doesNotContain("load generator stopped by an error")
                .doesNotContain("DeviceWaitInterruptedException");
    }

    /** The generator's thread is parked, which with no pause between its ops is in a wait for the device. */
    private static boolean waitingForTheDevice() {
        return Thread.getAllStackTraces().keySet().stream().anyMatch(thread -> thread.getName().equals("sample-load")
                && (thread.getState() == Thread.State.WAITING || thread.getState() == Thread.State.TIMED_WAITING));
    }

    private static long operations(Map<String, Object> status) {
        return ((Number) status.get("operations")).longValue();
    }
}
