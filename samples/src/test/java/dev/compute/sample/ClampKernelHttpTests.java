package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/** {@code POST /api/math/clamp}, the service's own kernel on pooled memory, over real HTTP. */
@SampleServiceTest
class ClampKernelHttpTests {

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
    void clampsEveryElementToTheBounds() {
        ResponseEntity<Map<String, Object>> response = clamp("{\"x\": [-3, -0.5, 0.25, 1, 7], \"min\": -1, \"max\": 0.5}");
        assertThat(response.getStatusCode().value()).isEqualTo(200);
        assertThat(response.getBody()).containsEntry("result", List.of(-1.0, -0.5, 0.25, 0.5, 0.5));
    }

    @Test
    void badRequestsGet400WithAClearMessage() {
        assertBadRequest(clamp("{\"x\": [1, 2], \"min\": 3, \"max\": 2}"), "'min' (3.0) is greater than 'max' (2.0)");
        assertBadRequest(clamp("{\"x\": [1, 2], \"min\": 0, \"max\": -0.0}"), "'min' (0.0) is greater than 'max' (-0.0)");
        assertBadRequest(clamp("{\"x\": [1, 2], \"min\": 0}"), "'max' is required");
        assertBadRequest(clamp("{\"min\": 0, \"max\": 1}"), "'x' is required: an array of numbers");
        assertBadRequest(clamp("{\"x\": [], \"min\": 0, \"max\": 1}"), "'x' must have 1 to");
        assertBadRequest(clamp("{\"x\": [1, 1e999], \"min\": 0, \"max\": 1}"), "'x' must hold finite numbers; element 1 is Infinity");
        assertBadRequest(clamp("{\"x\": [1], \"min\": -1e999, \"max\": 1}"), "'min' must be a finite number, not -Infinity");
        assertBadRequest(clamp("{\"x\": [1, \"two\"], \"min\": 0, \"max\": 1}"), "the request body is not the JSON this operation takes");
    }

    private static void assertBadRequest(ResponseEntity<Map<String, Object>> response, String message) {
        assertThat(response.getStatusCode().value()).isEqualTo(400);
        assertThat(response.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_PROBLEM_JSON);
        assertThat(response.getBody()).containsEntry("instance", "/api/math/clamp").extractingByKey("detail").asString().contains(message);
    }

    private ResponseEntity<Map<String, Object>> clamp(String json) {
        return http.post().uri("/api/math/clamp").contentType(MediaType.APPLICATION_JSON).body(json).retrieve().toEntity(JSON);
    }
}
