package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.testing.ChildJvm;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Contexts started and closed again and again in one JVM leave no threads behind, and nothing of them reachable; a
 * customizer that throws an Error fails the start and the next context starts; handlers and listeners that throw leave
 * no count or lock behind; a budget added at run time is metered.
 */
class StarterLifecycleTests {

    @SpringBootConfiguration
    @EnableAutoConfiguration(excludeName = {
            "org.springframework.boot.security.autoconfigure.SecurityAutoConfiguration",
            "org.springframework.boot.security.autoconfigure.UserDetailsServiceAutoConfiguration"})
    static class App {}

    private static Map<String, Long> threadsByName() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive)
                .collect(Collectors.groupingBy(t -> t.getName().replaceAll("\\d+", "#"), TreeMap::new, Collectors.counting()));
    }

    private static final String[] BUSY = {"compute.backend=cpu", "compute.memory.timeline.interval=10ms",
            "compute.memory.pooling.trim-interval=10ms", "compute.memory.pooling.compaction-interval=10ms",
            "compute.managers.a.backend=cpu", "compute.managers.b.backend=cpu",
            "compute.managers.b.budgets.t.limit=1MB", "compute.memory.leak-detection=paranoid"};

    @Test
    void contextsStartedAndClosedRepeatedlyLeaveNoThreads() {
        runOnce(); // first, so that threads the JVM keeps once started (a cleaner, the scope sweeper) exist before counting
        System.gc();
        Map<String, Long> before = threadsByName();
        for (int i = 0; i < 12; i++) {
            runOnce();
        }
        // threads of a closed context may take a moment to end after its close returned
        await().pollInSameThread().atMost(Duration.ofSeconds(20)).untilAsserted(() -> assertThat(grown(before, threadsByName()))
                .as("threads left behind by 12 closed contexts").isEmpty());
    }

    @Test
    void webContextsStartedUsedAndClosedLeaveNothingOfThemReachable() throws Exception {
        // soft references cleared at every collection: Boot's caches keep closed contexts softly until the heap is short
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), List.of("-XX:SoftRefLRUPolicyMSPerMB=0"),
                ClosedContextsScenario.class);
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("20 objects of 4 closed contexts, still reachable: []");
    }

    private static void runOnce() {
        try (ConfigurableApplicationContext context = run(BUSY)) {
            UnifiedMemoryManager a = context.getBean("aUnifiedMemoryManager", UnifiedMemoryManager.class);
            a.allocate(4096, MemoryLocation.HOST); // left open: the shutdown report
            context.getBean(MeterRegistry.class).get("compute.memory.reserved").gauges().forEach(g -> g.value());
        }
    }

    private static Map<String, Long> grown(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> grown = new TreeMap<>();
        after.forEach((name, count) -> {
            if (count > before.getOrDefault(name, 0L)) {
                grown.put(name, count - before.getOrDefault(name, 0L));
            }
        });
        return grown;
    }

    private static ConfigurableApplicationContext run(String[] properties) {
        return new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE).properties(properties).run();
    }

    @Configuration(proxyBeanMethods = false)
    static class ThrowingCustomizer {
        @Bean
        UnifiedMemoryManagerBuilderCustomizer boom() {
            return builder -> {
                throw new StackOverflowError("customizer");
            };
        }
    }

    @Test
    void aCustomizerThatThrowsAnErrorFailsStartUpAndTheNextContextStarts() {
        try {
            new SpringApplicationBuilder(App.class, ThrowingCustomizer.class).web(WebApplicationType.NONE)
                    .properties("compute.managers.a.backend=cpu", "compute.managers.b.backend=cpu").run().close();
            throw new AssertionError("started");
        } catch (Throwable e) {
        }
        try (ConfigurableApplicationContext context = run(new String[] {"compute.backend=cpu"})) {
            assertThat(context.getBean(UnifiedMemoryManager.class).isClosed()).isFalse();
        }
    }

    static final List<UnifiedBuffer> held = new ArrayList<>();

    @Configuration(proxyBeanMethods = false)
    static class ThrowingHandlersAndListeners {
        @Bean
        OutOfMemoryHandler throwingHandler() {
            return (location, bytes, attempt, failure) -> {
                throw new OutOfMemoryError("handler");
            };
        }

        @Bean
        UnifiedMemoryManagerBuilderCustomizer throwingListener() {
            return builder -> builder.eventListener(new MemoryEventListener() {
                @Override
                public void allocationFailed(MemoryLocation location, long requestedBytes, dev.compute.memory.OutOfMemoryReason reason) {
                    throw new LinkageError("listener");
                }

                @Override
                public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                    throw new IllegalStateException("listener");
                }
            });
        }
    }

    @Test
    void handlersAndListenersThatThrowLeaveNothingBehind() {
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class, ThrowingHandlersAndListeners.class)
                .web(WebApplicationType.NONE).properties("compute.backend=cpu", "compute.memory.pooling.max-pool-size=8MB",
                        "compute.budgets.t.limit=8MB").run()) {
            UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
            MemoryBudget tenant = context.getBean(ComputeBudgets.class).budget("t").orElseThrow();
            List<UnifiedBuffer> kept = new ArrayList<>();
            kept.add(manager.allocate(6 << 20, MemoryLocation.HOST));
            for (int i = 0; i < 3; i++) {
                try {
                    manager.allocate(6 << 20, MemoryLocation.HOST);
                    throw new AssertionError("allocated beyond the cap");
                } catch (Throwable e) {
                }
            }
            kept.forEach(UnifiedBuffer::close);
            try (UnifiedBuffer again = manager.allocate(6 << 20, MemoryLocation.HOST); UnifiedBuffer b = tenant.allocate(1 << 20, MemoryLocation.HOST)) {
                assertThat(again.byteSize()).isEqualTo(6 << 20);
            }
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }

    @Test
    void aBudgetAddedAtRunTimeIsMetered() {
        try (ConfigurableApplicationContext context = run(new String[] {"compute.backend=cpu", "compute.budgets.t.limit=8MB"})) {
            UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
            ComputeBudgets budgets = context.getBean(ComputeBudgets.class);
            budgets.add("default", manager.budget("runtime", 4 << 20), 1 << 20);
            MeterRegistry registry = context.getBean(MeterRegistry.class);
            Set<String> metered = registry.find("compute.memory.budget.limit").gauges().stream().map(g -> g.getId().getTag("budget"))
                    .collect(Collectors.toSet());
            assertThat(metered).contains("t", "runtime");
        }
    }
}
