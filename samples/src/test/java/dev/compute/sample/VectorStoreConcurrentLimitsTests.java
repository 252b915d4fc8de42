package dev.compute.sample;

import static dev.compute.boot.test.ComputeMemoryAssertions.assertThat;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.test.AutoConfigureComputeMemory;
import dev.compute.boot.test.ComputeMemoryExtension;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.webmvc.test.autoconfigure.WebMvcTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.test.web.servlet.assertj.MockMvcTester;
import org.springframework.test.web.servlet.assertj.MvcTestResult;

/**
 * The limits on stored vectors with two PUTs under way at once: the store's first allocation waits at a gate (the
 * store's manager is the test's real one behind a proxy that holds the first FLOAT64 allocation), so a second PUT
 * arrives while the first has passed its check and not yet kept its vector. The second must count the first's room
 * and be refused before it allocates, as the README promises; not allocate, keep its vector, and have the first,
 * earlier request refused after its memory was taken.
 */
@WebMvcTest(controllers = VectorController.class, properties = {"sample.vectors.max-count=10", "sample.vectors.max-bytes=64B"})
@AutoConfigureComputeMemory
@ExtendWith(ComputeMemoryExtension.class)
@Import({VectorMath.class, ClampKernelConfiguration.class, VectorStoreConcurrentLimitsTests.GatedStore.class})
@EnableConfigurationProperties(VectorStoreProperties.class)
class VectorStoreConcurrentLimitsTests {

    static final CountDownLatch FIRST_ALLOCATING = new CountDownLatch(1);
    static final CountDownLatch GO_ON = new CountDownLatch(1);

    @Autowired
    MockMvcTester mvc;

    @Autowired
    UnifiedMemoryManager manager;

    @Test
    void aPutWhileAnotherIsUnderWayCountsItsRoomAndIsRefusedBeforeItAllocates() throws Exception {
        long allocationsBefore = manager.statistics(MemoryLocation.HOST).allocations();
        CompletableFuture<MvcTestResult> first = CompletableFuture.supplyAsync(() -> put("first", "[1, 2, 3, 4, 5, 6, 7, 8]").exchange());
        try {
            assertThat(FIRST_ALLOCATING.await(10, TimeUnit.SECONDS)).as("the first PUT reached its allocation").isTrue();

            MvcTestResult second = put("second", "[1]").exchange();
            assertThat(second).hasStatus(HttpStatus.CONTENT_TOO_LARGE).bodyJson().extractingPath("$.detail").asString()
                    .contains("'second' (8 bytes) does not fit: the service keeps at most 64 bytes of vectors (sample.vectors.max-bytes) "
                            + "and holds 0 (and 64 being stored)");
            assertThat(manager.statistics(MemoryLocation.HOST).allocations()).as("the second PUT allocated nothing")
                    .isEqualTo(allocationsBefore);
        } finally {
            GO_ON.countDown();
        }
        assertThat(first.get(10, TimeUnit.SECONDS)).as("the first PUT, under way first, keeps its vector").hasStatus(HttpStatus.CREATED);
        assertThat(manager).hasOpenBuffers(1).hasRequestedBytes(MemoryLocation.HOST, 64);
        assertThat(mvc.delete().uri("/api/vectors/first")).hasStatus(HttpStatus.NO_CONTENT);
        assertThat(put("second", "[1]")).as("room again").hasStatus(HttpStatus.CREATED);
        assertThat(mvc.delete().uri("/api/vectors/second")).hasStatus(HttpStatus.NO_CONTENT);
    }

    private MockMvcTester.MockMvcRequestBuilder put(String name, String values) {
        return mvc.put().uri("/api/vectors/" + name).contentType(MediaType.APPLICATION_JSON).content("{\"values\": " + values + "}");
    }

    /** The store, on the test's manager behind a proxy whose first FLOAT64 allocation waits until the test lets it go on. */
    @TestConfiguration(proxyBeanMethods = false)
    static class GatedStore {

        @Bean
        VectorStore vectorStore(UnifiedMemoryManager manager, VectorStoreProperties limits) {
            AtomicBoolean gated = new AtomicBoolean();
            UnifiedMemoryManager gate = (UnifiedMemoryManager) Proxy.newProxyInstance(UnifiedMemoryManager.class.getClassLoader(),
                    new Class<?>[] {UnifiedMemoryManager.class}, (proxy, method, args) -> {
                        if (method.getName().equals("allocate") && args != null && args.length == 2 && args[0] == DataType.FLOAT64
                                && gated.compareAndSet(false, true)) {
                            FIRST_ALLOCATING.countDown();
                            // held until the test lets it go (its finally does): let go on its own after a few seconds, it
                            // stored its vector before a slow machine's second PUT and that PUT's check found none under way
                            if (!GO_ON.await(60, TimeUnit.SECONDS)) {
                                throw new IllegalStateException("the test never let the first PUT go on");
                            }
                        }
                        try {
                            return method.invoke(manager, args);
                        } catch (InvocationTargetException e) {
                            throw e.getCause();
                        }
                    });
            return new VectorStore(gate, limits);
        }
    }
}
