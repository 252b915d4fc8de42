package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.memory.UnifiedBuffer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/**
 * A vector replaced (PUT again) while a request on it waits for its buffer: the vector is there all along, so the
 * request reads or changes it in its new buffer, never answers 404, and never mixes the old buffer's figures with
 * the new one's values. The test holds the old buffer's lock, so the request finds that buffer and waits; it replaces
 * the vector under that lock (the store closes the old buffer under it), then lets the request go on.
 */
@SampleServiceTest
class VectorStoreReplaceTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Autowired
    VectorStore store;

    @Autowired
    VectorController controller;

    @Value("${local.server.port}")
    int port;

    @Test
    void aSumWaitingForAReplacedVectorSumsItsNewValues() throws Exception {
        assertThat(whileReplaced("replaced-sum", () -> store.sum("replaced-sum"))).isEqualTo(36.0);
    }

    @Test
    void aScaleWaitingForAReplacedVectorScalesItsNewValues() throws Exception {
        double[] scaled = whileReplaced("replaced-scale", () -> {
            store.scale("replaced-scale", 2);
            return store.get("replaced-scale").values();
        });
        assertThat(scaled).containsExactly(2, 4, 6, 8, 10, 12, 14, 16);
    }

    @Test
    void aGetWaitingForAReplacedVectorAnswersItsNewLengthAndValuesTogether() throws Exception {
        VectorController.Vector vector = whileReplaced("replaced-get", () -> controller.get("replaced-get"));
        assertThat(vector.length()).isEqualTo(8);
        assertThat(vector.values()).containsExactly(1, 2, 3, 4, 5, 6, 7, 8);
    }

    @Test
    void aPutDeletedBeforeItAnswersStillAnswersWhatItStored() throws Exception {
        RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {})
                .build();
        store.put("put-then-deleted", new double[] {1, 2, 3, 4});
        UnifiedBuffer old = store.find("put-then-deleted");
        CompletableFuture<ResponseEntity<Map<String, Object>>> replaced;
        synchronized (old) {
            // the PUT stores its buffer, then waits for this lock to close the old one
            replaced = CompletableFuture.supplyAsync(() -> http.put().uri("/api/vectors/put-then-deleted").contentType(MediaType.APPLICATION_JSON)
                    .body("{\"values\": [1, 2, 3, 4, 5, 6, 7, 8]}").retrieve().toEntity(JSON));
            await().atMost(Duration.ofSeconds(5)).until(() -> store.find("put-then-deleted") != old);
            assertThat(http.delete().uri("/api/vectors/put-then-deleted").retrieve().toBodilessEntity().getStatusCode().value()).isEqualTo(204);
        }
        ResponseEntity<Map<String, Object>> response = replaced.get(5, TimeUnit.SECONDS);
        assertThat(response.getStatusCode().value()).as("the PUT replaced the vector").isEqualTo(200);
        assertThat(response.getBody()).containsEntry("name", "put-then-deleted").containsEntry("length", 8).containsEntry("sizeBytes", 64);
    }

    /** Stores 4 values under {@code name}, starts {@code read} on a thread of its own and replaces them with 8 while it waits. */
    private <T> T whileReplaced(String name, Supplier<T> read) throws Exception {
        store.put(name, new double[] {1, 2, 3, 4});
        try {
            UnifiedBuffer old = store.find(name);
            CompletableFuture<T> result = new CompletableFuture<>();
            Thread reader;
            synchronized (old) {
                reader = Thread.ofPlatform().name("reader-" + name).start(() -> {
                    try {
                        result.complete(read.get());
                    } catch (Throwable e) {
                        result.completeExceptionally(e);
                    }
                });
                await().atMost(Duration.ofSeconds(5)).until(() -> reader.getState() == Thread.State.BLOCKED);
                store.put(name, new double[] {1, 2, 3, 4, 5, 6, 7, 8});
                assertThat(old.isClosed()).as("the old buffer closed under the lock the reader waits for").isTrue();
            }
            reader.join(Duration.ofSeconds(5));
            return result.get();
        } finally {
            store.delete(name);
        }
    }
}
