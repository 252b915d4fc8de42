package dev.compute.boot.actuate.trace;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/** The {@code computetrace} endpoint over real HTTP, as an operator uses it with curl. */
class ComputeTraceEndpointHttpTests {

    private static final String ENDPOINT = "/actuator/computetrace";

    /** Plain requests that report every status instead of throwing. */
    abstract static class HttpTest {
        @LocalServerPort
        int port;

        @Autowired
        UnifiedMemoryManager manager;

        RestClient http;

        @BeforeEach
        void client() {
            http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
        }

        @AfterEach
        void stopWhatATestLeftRunning() {
            if (manager.isRecording()) {
                manager.stopRecording();
            }
        }

        ResponseEntity<String> post(String action, String json) {
            return http.post().uri(ENDPOINT + "/" + action).contentType(MediaType.APPLICATION_JSON).body(json).retrieve().toEntity(String.class);
        }

        /** As {@code curl -X POST -H 'Content-Type: application/json' .../start}: Actuator takes JSON, here none. */
        ResponseEntity<String> postWithoutBody(String action) {
            return http.post().uri(ENDPOINT + "/" + action).contentType(MediaType.APPLICATION_JSON).retrieve().toEntity(String.class);
        }

        /** The links Actuator lists at its root: one per operation path it mapped. */
        String links() {
            return http.get().uri("/actuator").retrieve().body(String.class);
        }

        ResponseEntity<String> download() {
            return http.get().uri(ENDPOINT).retrieve().toEntity(String.class);
        }

        ResponseEntity<String> download(String name) {
            return http.get().uri(ENDPOINT + "?name=" + name).retrieve().toEntity(String.class);
        }
    }

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT,
            properties = "management.endpoints.web.exposure.include=computetrace")
    class ExposedWithoutAccess extends HttpTest {

        @Test
        void nothingIsMappedUntilTheOperatorGrantsAccess() {
            assertThat(postWithoutBody("start").getStatusCode().value()).isEqualTo(404);
            assertThat(download().getStatusCode().value()).isEqualTo(404);
            assertThat(manager.isRecording()).isFalse();
            assertThat(links()).doesNotContain("computetrace");
        }
    }

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
            "management.endpoints.web.exposure.include=computetrace", "management.endpoint.computetrace.access=read-only"})
    class ReadOnly extends HttpTest {

        @Test
        void aReadOnlyGrantDownloadsButCannotStart() {
            assertThat(links()).as("the download is mapped, start and stop are not")
                    .contains("/actuator/computetrace\"").doesNotContain("computetrace/{action}");
            assertThat(postWithoutBody("start").getStatusCode().is2xxSuccessful()).isFalse();
            assertThat(manager.isRecording()).isFalse();
            assertThat(download().getStatusCode().value()).as("nothing recorded yet").isEqualTo(404);
        }
    }

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
            "management.endpoints.web.exposure.include=computetrace", "management.endpoint.computetrace.access=unrestricted",
            "compute.memory.recording.max-events=1000"})
    class Unrestricted extends HttpTest {

        @Test
        void startAllocateStopAndDownloadTheTraceInTheReplayersFormat() {
            assertThat(links()).contains("/actuator/computetrace\"").contains("/actuator/computetrace/{action}");
            assertThat(download().getStatusCode().value()).as("no trace yet").isEqualTo(404);
            ResponseEntity<String> started = post("start", "{\"callSiteFrames\": 3}");
            assertThat(started.getStatusCode().value()).isEqualTo(200);
            assertThat(started.getBody()).contains("\"name\":\"default\"").contains("\"recording\":true").contains("\"maxEvents\":1000")
                    .contains("\"callSiteFrames\":3");

            try (UnifiedBuffer first = manager.allocate(4096, MemoryLocation.HOST); UnifiedBuffer second = manager.allocate(100, MemoryLocation.HOST)) {
                first.copyFrom(new byte[] {1});
                second.copyFrom(new byte[] {2});
            }
            ResponseEntity<String> stopped = postWithoutBody("stop");
            assertThat(stopped.getStatusCode().value()).isEqualTo(200);
            assertThat(stopped.getBody()).contains("\"recording\":false").contains("\"allocations\":2").contains("\"frees\":2")
                    .contains("\"truncated\":false");

            ResponseEntity<String> trace = download();
            assertThat(trace.getStatusCode().value()).isEqualTo(200);
            assertThat(trace.getHeaders().getContentType()).isNotNull()
                    .satisfies(type -> assertThat(type.isCompatibleWith(MediaType.TEXT_PLAIN)).isTrue());
            List<String> lines = trace.getBody().lines().toList();
            assertThat(lines.getFirst()).startsWith("# compute-memory allocation trace");
            long thread = Thread.currentThread().threadId();
            assertThat(lines).filteredOn(line -> line.startsWith("a,")).hasSize(2)
                    .anySatisfy(line -> assertThat(line).matches("a,\\d+,4096,0,HOST," + thread + ",\\d+,"
                            + "dev\\.compute\\.boot\\.actuate\\.trace\\.ComputeTraceEndpointHttpTests\\$Unrestricted\\.startAllocate.*"));
            assertThat(lines).filteredOn(line -> line.startsWith("f,")).hasSize(2);
            assertThat(lines).contains("# thread," + thread + "," + Thread.currentThread().getName());
        }

        @Test
        void aSecondStartOrAStopWithoutRecordingConflicts() {
            ResponseEntity<String> stop = postWithoutBody("stop");
            assertThat(stop.getStatusCode().value()).isEqualTo(409);
            assertThat(stop.getBody()).contains("no recording is under way");

            assertThat(postWithoutBody("start").getStatusCode().value()).isEqualTo(200);
            ResponseEntity<String> again = post("start", "{}");
            assertThat(again.getStatusCode().value()).isEqualTo(409);
            assertThat(again.getBody()).contains("under way already");
            assertThat(manager.isRecording()).isTrue();
        }

        @Test
        void badRequestsAreRefusedAndStartNothing() {
            ResponseEntity<String> tooMany = post("start", "{\"maxEvents\": 1001}");
            assertThat(tooMany.getStatusCode().value()).isEqualTo(400);
            assertThat(post("start", "{\"maxEvents\": 0}").getStatusCode().value()).isEqualTo(400);
            assertThat(post("start", "{\"callSiteFrames\": -1}").getStatusCode().value()).isEqualTo(400);
            assertThat(postWithoutBody("rewind").getStatusCode().value()).isEqualTo(400);
            ResponseEntity<String> unknown = post("start", "{\"name\": \"gpu\"}");
            assertThat(unknown.getStatusCode().value()).isEqualTo(400);
            // the reason in the body: Spring Boot's error page leaves an InvalidEndpointRequestException's out
            assertThat(unknown.getBody()).contains("No compute memory manager named 'gpu'").contains("managers: ");
            assertThat(tooMany.getBody()).contains("maxEvents must be from 1 to 1000");
            // past an int, or no whole number: the same reason, not Actuator's bare "Parameter mapping failure"
            ResponseEntity<String> pastAnInt = post("start", "{\"maxEvents\": 99999999999}");
            assertThat(pastAnInt.getStatusCode().value()).isEqualTo(400);
            assertThat(pastAnInt.getBody()).contains("maxEvents must be from 1 to 1000 (").contains("): 99999999999");
            ResponseEntity<String> notANumber = post("start", "{\"callSiteFrames\": \"many\"}");
            assertThat(notANumber.getStatusCode().value()).isEqualTo(400);
            assertThat(notANumber.getBody()).contains("callSiteFrames must be from 0 to 64: many");
            ResponseEntity<String> downloadUnknown = download("gpu");
            assertThat(downloadUnknown.getStatusCode().value()).isEqualTo(400);
            assertThat(downloadUnknown.getBody()).contains("No compute memory manager named 'gpu'");
            assertThat(manager.isRecording()).isFalse();
        }
    }

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
            "management.endpoints.web.exposure.include=computetrace", "management.endpoint.computetrace.access=unrestricted",
            "compute.managers.big.backend=cpu", "compute.managers.small.backend=cpu", "compute.primary=big",
            "compute.managers.small.memory.recording.max-events=1000"})
    class SeveralManagers extends HttpTest {

        @Autowired
        @Qualifier("small")
        UnifiedMemoryManager small;

        @Test
        void aManagerIsChosenByNameAndEachKeepsItsOwnTrace() {
            ResponseEntity<String> started = post("start", "{\"name\": \"small\"}");
            assertThat(started.getStatusCode().value()).isEqualTo(200);
            assertThat(started.getBody()).contains("\"name\":\"small\"");
            assertThat(small.isRecording()).isTrue();
            assertThat(manager.isRecording()).as("the primary, big, records nothing").isFalse();
            small.allocate(4096, MemoryLocation.HOST).close();
            assertThat(post("stop", "{\"name\": \"small\"}").getBody()).contains("\"name\":\"small\"").contains("\"allocations\":1");

            assertThat(download("small").getBody()).contains("a,1,4096,0,HOST,");
            assertThat(download().getStatusCode().value()).as("big, the primary, has no trace").isEqualTo(404);
        }

        /** A named manager takes every key of compute.*, its recording's bounds too: they were bound and checked, then ignored. */
        @Test
        void aNamedManagersOwnRecordingSettingsAreItsDefaultAndItsBound() {
            assertThat(post("start", "{\"name\": \"small\"}").getBody()).contains("\"maxEvents\":1000,");
            post("stop", "{\"name\": \"small\"}");
            ResponseEntity<String> tooMany = post("start", "{\"name\": \"small\", \"maxEvents\": 1001}");
            assertThat(tooMany.getStatusCode().value()).isEqualTo(400);
            assertThat(small.isRecording()).isFalse();
            assertThat(post("start", "{}").getBody()).as("big's are compute.memory.recording's defaults").contains("\"maxEvents\":1000000,");
        }

        @AfterEach
        void stopSmall() {
            if (small.isRecording()) {
                small.stopRecording();
            }
        }
    }

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
            "management.endpoints.web.exposure.include=computetrace", "management.endpoint.computetrace.access=unrestricted",
            "compute.memory.recording.enabled=false"})
    class RecordingOff extends HttpTest {

        @Test
        void startingSaysWhichPropertyTurnedRecordingOff() {
            ResponseEntity<String> start = postWithoutBody("start");
            assertThat(start.getStatusCode().value()).isEqualTo(409);
            assertThat(start.getBody()).contains("compute.memory.recording.enabled=false");
            assertThat(manager.settings().allocationRecording()).isFalse();
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
