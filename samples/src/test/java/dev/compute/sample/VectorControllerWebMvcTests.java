package dev.compute.sample;

import static dev.compute.boot.test.ComputeMemoryAssertions.assertThat;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.params.provider.Arguments.arguments;

import dev.compute.boot.test.AutoConfigureComputeMemory;
import dev.compute.boot.test.ComputeMemoryExtension;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.webmvc.test.autoconfigure.WebMvcTest;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.test.web.servlet.assertj.MockMvcTester;

/**
 * The REST API's controller in a web slice, on a real manager from the test module: the CPU backend, every buffer
 * tracked, and every test failed if it leaves a buffer open ({@link ComputeMemoryExtension}). Small limits on
 * stored vectors, to reach them.
 */
@WebMvcTest(controllers = VectorController.class, properties = {"sample.vectors.max-count=2", "sample.vectors.max-bytes=64B"})
@AutoConfigureComputeMemory
@ExtendWith(ComputeMemoryExtension.class)
@Import({VectorMath.class, VectorStore.class, ClampKernelConfiguration.class})
@EnableConfigurationProperties(VectorStoreProperties.class)
class VectorControllerWebMvcTests {

    @Autowired
    MockMvcTester mvc;

    @Autowired
    UnifiedMemoryManager manager;

    @Test
    void mathOnPostedArraysRunsInPooledMemoryAndGivesItBack() {
        assertThat(post("/api/math/axpy", "{\"alpha\": 2, \"x\": [1, 2, 3], \"y\": [10, 20, 30]}")).hasStatusOk()
                .bodyJson().extractingPath("$.result").asArray().containsExactly(12.0, 24.0, 36.0);
        assertThat(manager).hasNoOpenBuffers().statistics(MemoryLocation.HOST).satisfies(host -> assertThat(host.allocations()).isPositive());
    }

    @Test
    void storedVectorsPastTheLimitsAreRefusedWith413AndNothingIsKept() {
        assertThat(put("a", "[1, 2, 3, 4]")).hasStatus(HttpStatus.CREATED);
        assertThat(put("b", "[1, 2, 3, 4]")).hasStatus(HttpStatus.CREATED);
        assertThat(manager).hasOpenBuffers(2).hasRequestedBytes(MemoryLocation.HOST, 64);

        assertContentTooLarge(put("c", "[1]"), "the service keeps at most 2 vectors (sample.vectors.max-count) and has as many");
        assertContentTooLarge(put("a", "[1, 2, 3, 4, 5]"),
                "'a' (40 bytes) does not fit: the service keeps at most 64 bytes of vectors (sample.vectors.max-bytes) and holds 64");
        assertThat(manager).as("the refused vectors were never kept").hasOpenBuffers(2).hasRequestedBytes(MemoryLocation.HOST, 64);
        assertThat(mvc.get().uri("/api/vectors/a")).hasStatusOk().bodyJson().extractingPath("$.values").asArray().containsExactly(1.0, 2.0, 3.0, 4.0);

        assertThat(put("a", "[5, 6, 7]")).as("a replacement that fits").hasStatusOk();
        assertThat(mvc.delete().uri("/api/vectors/b")).hasStatus(HttpStatus.NO_CONTENT);
        assertThat(put("c", "[1]")).as("room again after a delete").hasStatus(HttpStatus.CREATED);
        assertThat(mvc.delete().uri("/api/vectors/a")).hasStatus(HttpStatus.NO_CONTENT);
        assertThat(mvc.delete().uri("/api/vectors/c")).hasStatus(HttpStatus.NO_CONTENT);
    }

    static Stream<Arguments> notFiniteNumbers() {
        return Stream.of(
                arguments("/api/math/sum", "{\"x\": [1, NaN]}", "the request body is not the JSON this operation takes"),
                arguments("/api/math/sum", "{\"x\": [1, \"NaN\"]}", "'x' must hold finite numbers; element 1 is NaN"),
                arguments("/api/math/sum", "{\"x\": [\"Infinity\"]}", "'x' must hold finite numbers; element 0 is Infinity"),
                arguments("/api/math/sum", "{\"x\": [\"-Infinity\"]}", "'x' must hold finite numbers; element 0 is -Infinity"),
                arguments("/api/math/sum", "{\"x\": [-1e309]}", "'x' must hold finite numbers; element 0 is -Infinity"),
                arguments("/api/math/scale", "{\"alpha\": \"NaN\", \"x\": [1]}", "'alpha' must be a finite number, not NaN"),
                arguments("/api/math/scale", "{\"alpha\": \"Infinity\", \"x\": [1]}", "'alpha' must be a finite number, not Infinity"),
                arguments("/api/math/axpy", "{\"alpha\": 1e999, \"x\": [1], \"y\": [1]}", "'alpha' must be a finite number, not Infinity"),
                arguments("/api/math/clamp", "{\"x\": [1], \"min\": \"-Infinity\", \"max\": 1}", "'min' must be a finite number, not -Infinity"));
    }

    @ParameterizedTest
    @MethodSource("notFiniteNumbers")
    void notANumberAndInfinityAsStringsOrByOverflowAreRefusedAsNaNIs(String path, String body, String message) {
        assertBadRequest(post(path, body), message);
    }

    @Test
    void aStoredVectorTakesOnlyFiniteNumbersToo() {
        assertBadRequest(put("v", "[1, \"NaN\"]"), "'values' must hold finite numbers; element 1 is NaN");
        assertThat(put("v", "[1, 2]")).hasStatus(HttpStatus.CREATED);
        assertBadRequest(mvc.post().uri("/api/vectors/v/scale").contentType(MediaType.APPLICATION_JSON).content("{\"alpha\": \"-Infinity\"}"),
                "'alpha' must be a finite number, not -Infinity");
        assertThat(mvc.delete().uri("/api/vectors/v")).hasStatus(HttpStatus.NO_CONTENT);
    }

    static Stream<Arguments> overflowingResults() {
        return Stream.of(
                arguments("/api/math/axpy", "{\"alpha\": 2, \"x\": [1, 1e308], \"y\": [1, 1e308]}",
                        "alpha * x + y overflows FLOAT64: element 1 of the result is Infinity"),
                arguments("/api/math/scale", "{\"alpha\": -1e10, \"x\": [1e300]}",
                        "alpha * x overflows FLOAT64: element 0 of the result is -Infinity"),
                arguments("/api/math/sum", "{\"x\": [1e308, 1e308]}", "the sum of 'x' overflows FLOAT64 (Infinity)"));
    }

    @ParameterizedTest
    @MethodSource("overflowingResults")
    void aResultBeyondFloat64IsRefusedNotAnsweredAsTheStringInfinity(String path, String body, String message) {
        assertBadRequest(post(path, body), message);
        assertThat(manager).hasNoOpenBuffers();
    }

    @Test
    void anOperationThatWouldOverflowAStoredVectorIsRefusedAndTheVectorKeepsItsValues() {
        assertThat(put("big", "[1e308, 1]")).hasStatus(HttpStatus.CREATED);
        assertThat(put("ones", "[1, 1]")).hasStatus(HttpStatus.CREATED);
        try {
            assertBadRequest(post("/api/vectors/big/scale", "{\"alpha\": 10}"), "scaling 'big' by 10.0 overflows FLOAT64 at element 0");
            assertBadRequest(post("/api/vectors/big/axpy", "{\"alpha\": 1, \"x\": \"big\"}"), "'big' + 1.0 * 'big' overflows FLOAT64 at element 0");
            assertBadRequest(post("/api/vectors/ones/axpy", "{\"alpha\": 1e300, \"x\": \"big\"}"),
                    "'ones' + 1.0E300 * 'big' overflows FLOAT64 at element 0");
            assertThat(mvc.get().uri("/api/vectors/big")).as("unchanged, finite").hasStatusOk()
                    .bodyJson().extractingPath("$.values").asArray().containsExactly(1e308, 1.0);
            assertThat(mvc.get().uri("/api/vectors/ones")).hasStatusOk().bodyJson().extractingPath("$.values").asArray().containsExactly(1.0, 1.0);
            assertThat(post("/api/vectors/big/scale", "{\"alpha\": 1.5}")).as("what fits is taken").hasStatusOk();

            assertThat(put("ones", "[1e308, 1e308]")).hasStatusOk();
            assertBadRequest(mvc.get().uri("/api/vectors/ones/sum"), "the sum of 'ones' overflows FLOAT64 (Infinity)");
        } finally {
            assertThat(mvc.delete().uri("/api/vectors/big")).hasStatus(HttpStatus.NO_CONTENT);
            assertThat(mvc.delete().uri("/api/vectors/ones")).hasStatus(HttpStatus.NO_CONTENT);
        }
    }

    @Test
    void aLargeFiniteNumberIsAFloat64AndTaken() {
        assertThat(post("/api/math/sum", "{\"x\": [1e39, 1e39]}")).hasStatusOk().bodyJson().extractingPath("$.sum").isEqualTo(2e39);
    }

    private void assertContentTooLarge(MockMvcTester.MockMvcRequestBuilder request, String message) {
        assertThat(request).hasStatus(HttpStatus.CONTENT_TOO_LARGE).hasContentType(MediaType.APPLICATION_PROBLEM_JSON)
                .bodyJson().extractingPath("$.detail").asString().contains(message);
    }

    private void assertBadRequest(MockMvcTester.MockMvcRequestBuilder request, String message) {
        assertThat(request).hasStatus(HttpStatus.BAD_REQUEST).hasContentType(MediaType.APPLICATION_PROBLEM_JSON)
                .bodyJson().extractingPath("$.detail").asString().contains(message);
    }

    private MockMvcTester.MockMvcRequestBuilder post(String path, String json) {
        return mvc.post().uri(path).contentType(MediaType.APPLICATION_JSON).content(json);
    }

    private MockMvcTester.MockMvcRequestBuilder put(String name, String values) {
        return mvc.put().uri("/api/vectors/" + name).contentType(MediaType.APPLICATION_JSON).content("{\"values\": " + values + "}");
    }
}
