package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/**
 * A burst of requests carrying vectors over real HTTP: past {@code sample.heavy-requests.max-concurrent} running,
 * the others are answered 503 with {@code Retry-After} and a problem detail, without their bodies being read.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "sample.heavy-requests.max-concurrent=2", "sample.heavy-requests.max-wait=50ms", "sample.heavy-requests.retry-after=3s"})
class HeavyRequestLimitHttpTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    /** What the largest axpy takes: two arrays of the longest vector, some 20 characters a number. */
    private static final long LARGEST_AXPY_BYTES = 2L * VectorStore.MAX_LENGTH * 20;

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
    void aBurstPastTheBoundIsAnswered503WithoutReadingItsBodiesAndTheAdmittedOnesFinish() throws Exception {
        String head = "{\"alpha\": 2, \"x\": [1, 2, 3], \"y\": [";
        String tail = "10, 20, 30]}";
        try (Socket first = new Socket("127.0.0.1", port); Socket second = new Socket("127.0.0.1", port);
                ExecutorService burst = Executors.newVirtualThreadPerTaskExecutor()) {
            // two requests that hold both permits: their handlers wait for the rest of their bodies
            for (Socket admitted : List.of(first, second)) {
                admitted.setSoTimeout((int) Duration.ofMinutes(1).toMillis());
                sendHead(admitted, "/api/math/axpy", head.length() + tail.length(), head);
            }
            // a whole small request runs while a permit is free, and is refused once both are held
            await().atMost(Duration.ofSeconds(30)).until(() -> axpy().getStatusCode().value() == 503);

            // a burst of the largest axpy's: each declares its whole body but sends none of it
            List<CompletableFuture<String>> refused = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                refused.add(CompletableFuture.supplyAsync(() -> {
                    try (Socket socket = new Socket("127.0.0.1", port)) {
                        socket.setSoTimeout((int) Duration.ofMinutes(1).toMillis());
                        sendHead(socket, "/api/math/axpy", LARGEST_AXPY_BYTES, "{\"alpha\": 2, \"x\": [");
                        return response(socket);
                    } catch (IOException e) {
                        throw new IllegalStateException(e);
                    }
                }, burst));
            }
            for (CompletableFuture<String> response : refused) {
                assertThat(response.get(1, TimeUnit.MINUTES)).startsWith("HTTP/1.1 503 ")
                        .containsIgnoringCase("Retry-After: 3")
                        .containsIgnoringCase("Content-Type: application/problem+json")
                        .contains("\"status\":503")
                        .contains("at most 2 requests carrying vectors at once (sample.heavy-requests.max-concurrent)");
            }

            // the admitted ones finish with their results, and give their permits back
            for (Socket admitted : List.of(first, second)) {
                admitted.getOutputStream().write(tail.getBytes(StandardCharsets.US_ASCII));
                admitted.getOutputStream().flush();
                assertThat(response(admitted)).startsWith("HTTP/1.1 200 ").contains("{\"result\":[12.0,24.0,36.0]}");
            }
            ResponseEntity<Map<String, Object>> after = axpy();
            assertThat(after.getStatusCode().value()).isEqualTo(200);
            assertThat(after.getBody()).containsEntry("result", List.of(3.0, 6.0));
        }
        // requests that carry no vector are never held back
        assertThat(http.get().uri("/api/vectors").retrieve().toEntity(String.class).getStatusCode().value()).isEqualTo(200);
    }

    private ResponseEntity<Map<String, Object>> axpy() {
        return http.post().uri("/api/math/axpy").contentType(MediaType.APPLICATION_JSON)
                .body("{\"alpha\": 1, \"x\": [1, 2], \"y\": [2, 4]}").retrieve().toEntity(JSON);
    }

    private static void sendHead(Socket socket, String path, long bodyBytes, String bodyStart) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + "Content-Length: " + bodyBytes + "\r\n\r\n" + bodyStart).getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    /**
     * One response, read to the end of its body rather than to the end of the connection: the server keeps a refused
     * request's connection open for a while to drain a body this test never sends.
     */
    private static String response(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        ByteArrayOutputStream read = new ByteArrayOutputStream();
        while (!complete(read.toString(StandardCharsets.US_ASCII))) {
            int b = in.read();
            if (b < 0) {
                break;
            }
            read.write(b);
        }
        return read.toString(StandardCharsets.UTF_8);
    }

    private static boolean complete(String response) {
        int headEnd = response.indexOf("\r\n\r\n");
        if (headEnd < 0) {
            return false;
        }
        Matcher length = Pattern.compile("(?im)^Content-Length: *(\\d+)").matcher(response.substring(0, headEnd));
        return length.find() ? response.length() - headEnd - 4 >= Integer.parseInt(length.group(1)) : response.endsWith("\r\n0\r\n\r\n");
    }
}
