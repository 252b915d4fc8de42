package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.MediaType;
import org.springframework.web.client.RestClient;

/**
 * Nothing the computememory endpoint returns carries the contents of memory: with recognisable bytes in a live
 * buffer at every location and a recognisable number in a vector kept by the REST API, no response (the summary,
 * every location, the trim) contains them, as text, hex or Base64.
 */
@SampleServiceTest
class ActuatorDisclosureTests {

    private static final String TEXT = "MEMORY-CONTENT-PROBE-7f3a";
    private static final byte[] BYTES = TEXT.getBytes(StandardCharsets.US_ASCII);
    private static final double NUMBER = 271828.182845;

    @Autowired
    UnifiedMemoryManager manager;

    @Value("${local.server.port}")
    int port;

    @Test
    void noResponseOfTheEndpointContainsWhatIsInMemory() {
        RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).build();
        List<UnifiedBuffer> probes = new ArrayList<>();
        http.put().uri("/api/vectors/disclosure-probe").contentType(MediaType.APPLICATION_JSON)
                .body("{\"values\": [" + NUMBER + ", " + NUMBER + "]}").retrieve().toBodilessEntity();
        try {
            for (MemoryLocation location : manager.locations()) {
                UnifiedBuffer probe = manager.allocate(4096, location);
                probes.add(probe);
                probe.copyFrom(BYTES);
                byte[] back = new byte[BYTES.length];
                probe.copyTo(back);
                assertThat(back).as("the probe is really in memory at " + location).isEqualTo(BYTES);
            }
            assertThat(http.get().uri("/api/vectors/disclosure-probe").retrieve().body(String.class))
                    .as("the REST API itself returns the vector").contains(Double.toString(NUMBER));

            List<String> responses = new ArrayList<>();
            responses.add(http.get().uri("/actuator/computememory").retrieve().body(String.class));
            for (MemoryLocation location : manager.locations()) {
                String detail = http.get().uri("/actuator/computememory/" + location.name().toLowerCase(Locale.ROOT)).retrieve().body(String.class);
                assertThat(detail).as("the location's blocks are there").contains("\"state\":\"LIVE\"");
                responses.add(detail);
            }
            responses.add(http.post().uri("/actuator/computememory").contentType(MediaType.APPLICATION_JSON).body("{}").retrieve().body(String.class));

            assertThat(responses).hasSize(manager.locations().size() + 2).allSatisfy(response -> assertThat(response)
                    .doesNotContain(TEXT)
                    .doesNotContainIgnoringCase(HexFormat.of().formatHex(BYTES))
                    .doesNotContain(Base64.getEncoder().encodeToString(BYTES).substring(0, 32))
                    .doesNotContain("271828.18"));
        } finally {
            probes.forEach(UnifiedBuffer::close);
            http.delete().uri("/api/vectors/disclosure-probe").retrieve().toBodilessEntity();
        }
    }
}
