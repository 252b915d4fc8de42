package dev.compute.boot.actuate.endpoint;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.web.client.RestClient;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A location's segments and blocks over real HTTP: a pool of many live blocks answers at most
 * {@link ComputeMemoryEndpoint#DEFAULT_MAX_BLOCKS} of them (or {@code maxBlocks}), saying how many it left out, in all
 * and per segment; a small pool's answer is whole, in the shape it always had.
 */
@SpringBootTest(classes = ComputeMemoryEndpointBlockLimitHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT,
        properties = {"management.endpoints.web.exposure.include=computememory", "compute.backend=cpu"})
class ComputeMemoryEndpointBlockLimitHttpTests {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    private final List<UnifiedBuffer> buffers = new ArrayList<>();

    @AfterEach
    void closeBuffers() {
        buffers.forEach(UnifiedBuffer::close);
    }

    private JsonNode host(String query) {
        return JSON.readTree(RestClient.create("http://127.0.0.1:" + port).get().uri("/actuator/computememory/default/host" + query).retrieve()
                .body(String.class));
    }

    private static int blocksIn(JsonNode answer) {
        int blocks = 0;
        for (JsonNode segment : answer.get("segments")) {
            blocks += segment.get("blocks").size();
        }
        return blocks;
    }

    private int blocksInPool() {
        return manager.snapshot(MemoryLocation.HOST).segments().stream().mapToInt(segment -> segment.blocks().size()).sum();
    }

    @Test
    void aSmallPoolIsAnsweredWholeAndMaxBlocksLeavesTheRestOutSayingHowMany() {
        for (int i = 0; i < 4; i++) {
            buffers.add(manager.allocate(4096, MemoryLocation.HOST));
        }
        int inPool = blocksInPool();

        JsonNode whole = host("");
        assertThat(blocksIn(whole)).isEqualTo(inPool);
        assertThat(whole.get("blocksLeftOut").asInt()).isZero();
        for (JsonNode segment : whole.get("segments")) {
            assertThat(segment.get("blocksLeftOut").asInt()).isZero();
        }

        JsonNode two = host("?maxBlocks=2");
        assertThat(blocksIn(two)).isEqualTo(2);
        assertThat(two.get("blocksLeftOut").asInt()).isEqualTo(inPool - 2);
        int leftOutBySegment = 0;
        for (JsonNode segment : two.get("segments")) {
            leftOutBySegment += segment.get("blocksLeftOut").asInt();
        }
        assertThat(leftOutBySegment).as("each segment says how many of its blocks are left out").isEqualTo(inPool - 2);
        assertThat(two.get("segments").size()).as("every segment is still listed").isEqualTo(whole.get("segments").size());
    }

    @Test
    void aPoolOfManyLiveBlocksAnswersABoundedNumberOfThem() {
        for (int i = 0; i < ComputeMemoryEndpoint.DEFAULT_MAX_BLOCKS + 100; i++) {
            buffers.add(manager.allocate(64, MemoryLocation.HOST));
        }
        long live = manager.snapshot(MemoryLocation.HOST).segments().stream().flatMap(segment -> segment.blocks().stream())
                .filter(block -> block.state() == MemorySnapshot.BlockState.LIVE).count();
        assertThat(live).isGreaterThan(ComputeMemoryEndpoint.DEFAULT_MAX_BLOCKS);
        int inPool = blocksInPool();

        JsonNode answer = host("");

        assertThat(blocksIn(answer)).isEqualTo(ComputeMemoryEndpoint.DEFAULT_MAX_BLOCKS);
        assertThat(answer.get("blocksLeftOut").asInt()).isEqualTo(inPool - ComputeMemoryEndpoint.DEFAULT_MAX_BLOCKS);
        assertThat(blocksIn(host("?maxBlocks=" + inPool))).as("an operator may ask for all").isEqualTo(inPool);
    }

    @Test
    void aNegativeOrUnreadableMaxBlocksIsABadRequest() {
        for (String path : List.of("/default/host", "/host")) {
            assertThat(status(path + "?maxBlocks=-1")).as(path).isEqualTo(400);
            assertThat(status(path + "?maxBlocks=abc")).as(path).isEqualTo(400);
            assertThat(status(path + "?maxBlocks=99999999999")).as(path + ": past an int").isEqualTo(400);
        }
    }

    @Test
    void aManagerOrLocationThatIsNotThereIsNotFoundWhateverMaxBlocksSays() {
        for (String path : List.of("/nosuch", "/nosuch/host", "/default/bogus", "/default/DEVICEX", "/nosuch/bogus")) {
            assertThat(status(path + "?maxBlocks=-1")).as(path + " with a bad maxBlocks").isEqualTo(404);
            assertThat(status(path + "?maxBlocks=abc")).as(path + " with an unreadable maxBlocks").isEqualTo(404);
            assertThat(status(path + "?maxBlocks=5")).as(path).isEqualTo(404);
            assertThat(status(path)).as(path).isEqualTo(404);
        }
        assertThat(status("/default/Host")).as("a location's name in any case, as the one-selector path reads it").isEqualTo(200);
    }

    private int status(String path) {
        return RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(code -> true, (request, response) -> {})
                .build().get().uri("/actuator/computememory" + path).retrieve().toBodilessEntity().getStatusCode().value();
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
