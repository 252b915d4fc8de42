package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.task.ThreadPoolTaskExecutorBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.core.task.AsyncTaskExecutor;
import org.springframework.core.task.TaskDecorator;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;

/**
 * A task of Spring Boot's executor allocates a buffer and views it, then its pool thread idles while another thread
 * closes the buffer: with the task scope (the default) the view ended with the task, so the memory goes back at the
 * close; without it the view is the idle thread's, and the memory waits, counted as held, not live.
 */
class TaskScopeTests {

    /** The task: a buffer allocated and viewed on the executor's thread, handed back open. */
    static UnifiedBuffer allocateAndView(UnifiedMemoryManager manager) {
        UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST);
        buffer.hostView().fill((byte) 1);
        return buffer;
    }

    @Nested
    @SpringBootTest(classes = Application.class, properties = "compute.backend=cpu")
    class WithTheTaskScope {
        @Autowired
        UnifiedMemoryManager manager;

        @Autowired
        AsyncTaskExecutor applicationTaskExecutor;

        @Autowired
        TaskDecorator decorator;

        @Test
        void theViewEndsWithTheTaskAndTheCloseElsewhereGivesTheMemoryBackAtOnce() throws Exception {
            UnifiedBuffer buffer = applicationTaskExecutor.submit(() -> allocateAndView(manager)).get(10, TimeUnit.SECONDS);

            buffer.close(); // here, while the executor's thread idles (or is just ending the task's scope)

            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
            // the task's scope ends as the executor's thread finishes the task, which a loaded machine may delay
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).isZero());
            assertThat(decorator).isInstanceOf(TaskScopeDecorator.class);
        }
    }

    @Nested
    @SpringBootTest(classes = Application.class, properties = {"compute.backend=cpu", "compute.scopes.tasks=false",
            "compute.memory.held-memory-warning=0"})
    class WithoutIt {
        @Autowired
        UnifiedMemoryManager manager;

        @Autowired
        AsyncTaskExecutor applicationTaskExecutor;

        @Test
        void theIdleThreadsViewHoldsTheMemoryWhichIsNotCountedAsLive() throws Exception {
            UnifiedBuffer buffer = applicationTaskExecutor.submit(() -> allocateAndView(manager)).get(10, TimeUnit.SECONDS);

            buffer.close();
            Thread.sleep(200); // time enough for a task scope to have ended, had there been one

            MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
            assertThat(host.liveBuffers()).as("closed").isZero();
            assertThat(host.heldBuffers()).as("waiting for the idle thread's view").isEqualTo(1);
            assertThat(host.heldBytes()).isEqualTo(4096);
        }
    }

    /**
     * An executor the application defines itself replaces Boot's (its {@code @Async} methods run there): built from
     * Boot's {@link ThreadPoolTaskExecutorBuilder}, as Boot advises, it gets the task scope too.
     */
    @Nested
    @SpringBootTest(classes = OwnExecutorApplication.class, properties = "compute.backend=cpu")
    class WithAnExecutorOfTheApplicationsOwnBuiltByBoot {
        @Autowired
        UnifiedMemoryManager manager;

        @Autowired
        ThreadPoolTaskExecutor ownExecutor;

        @Test
        void itsTasksViewsEndWithThemAndTheCloseElsewhereGivesTheMemoryBack() throws Exception {
            UnifiedBuffer buffer = ownExecutor.submit(() -> allocateAndView(manager)).get(10, TimeUnit.SECONDS);

            buffer.close();

            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).isZero());
        }
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class Application {}

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class OwnExecutorApplication {
        @Bean
        ThreadPoolTaskExecutor ownExecutor(ThreadPoolTaskExecutorBuilder builder) {
            return builder.corePoolSize(1).maxPoolSize(1).threadNamePrefix("own-").build();
        }
    }
}
