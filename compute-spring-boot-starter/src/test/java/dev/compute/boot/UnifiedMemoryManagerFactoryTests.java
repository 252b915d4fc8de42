package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.annotation.Order;

/** What the starter adds to a manager's builder besides the properties: handlers, customizers, a relay for its events. */
class UnifiedMemoryManagerFactoryTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class))
            .withPropertyValues("compute.memory.timeline.interval=0");

    @Test
    void outOfMemoryHandlerBeansAreAskedWhenAnAllocationFindsNoMemory() {
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=8MB", "compute.memory.out-of-memory-retries=2")
                .withUserConfiguration(FreeingHandler.class).run(context -> {
                    UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
                    assertThat(manager.settings().outOfMemoryRetries()).isEqualTo(2);
                    FreeingHandler handler = context.getBean(FreeingHandler.class);
                    handler.held.set(manager.allocate(6L << 20, MemoryLocation.HOST));
                    try (UnifiedBuffer second = manager.allocate(6L << 20, MemoryLocation.HOST)) {
                        assertThat(handler.calls).containsExactly("HOST 6291456 attempt 1");
                    }
                });
    }

    @Test
    void aHandlerBeanThatUsesTheManagerItFreesMemoryOfStartsAndIsAsked() {
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=8MB", "compute.memory.out-of-memory-retries=2")
                .withBean(CacheOfBuffers.class).run(context -> {
                    assertThat(context).hasNotFailed();
                    CacheOfBuffers cache = context.getBean(CacheOfBuffers.class);
                    cache.fill(6L << 20);
                    try (UnifiedBuffer second = context.getBean(UnifiedMemoryManager.class).allocate(6L << 20, MemoryLocation.HOST)) {
                        assertThat(cache.evictions).as("the cache gave its buffer back").isEqualTo(1);
                    }
                });
    }

    @Test
    void customizersApplyInTheirOrderToEveryManagerOrToTheOneTheyName() {
        runner.withPropertyValues("compute.managers.cpu.backend=cpu", "compute.managers.small.memory.pooling.max-pool-size=64MB")
                .withUserConfiguration(Customizers.class, OnlySmall.class).run(context -> {
                    Customizers customizers = context.getBean(Customizers.class);
                    assertThat(customizers.applied).containsExactly("first cpu?", "second", "first small?", "second", "only small");
                    assertThat(context.getBean("smallUnifiedMemoryManager", UnifiedMemoryManager.class).settings().leakDetection())
                            .hasToString("DISABLED");
                    assertThat(context.getBean("cpuUnifiedMemoryManager", UnifiedMemoryManager.class).settings().leakDetection())
                            .hasToString("SIMPLE");
                });
    }

    @Test
    void theOneManagerOfComputeIsNamedDefaultForCustomizers() {
        runner.withUserConfiguration(Customizers.class).run(context ->
                assertThat(context.getBean(Customizers.class).applied).containsExactly("first default?", "second"));
    }

    @Test
    void aCustomizerForAManagerTheStarterDoesNotBuildStopsStartUpNamingThoseItBuilds() {
        // a typo ("smal") customized nothing, silently
        runner.withPropertyValues("compute.managers.cpu.backend=cpu", "compute.managers.small.backend=cpu")
                .withBean("typo", UnifiedMemoryManagerBuilderCustomizer.class, () -> UnifiedMemoryManagerBuilderCustomizer.forManager("smal", builder -> {}))
                .run(context -> assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
                        .isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining("forManager(\"smal\", ...) names no manager the starter builds: cpu, small"));
        runner.withBean("gpu", UnifiedMemoryManagerBuilderCustomizer.class, () -> UnifiedMemoryManagerBuilderCustomizer.forManager("gpu", builder -> {}))
                .run(context -> assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
                        .hasMessageContaining("names no manager the starter builds: default"));
    }

    /** A value refused as it is bound (a recording's bounds) is named under the prefix the manager reads, as every other is. */
    @Test
    void aManagerReadFromAPrefixHasAValueRefusedWhileBindingNamedUnderThatPrefix() {
        runner.withPropertyValues("spring.test.compute.memory.recording.max-events=0").run(context -> {
            UnifiedMemoryManagerFactory factory = context.getBean(UnifiedMemoryManagerFactory.class);
            assertThatThrownBy(() -> factory.createFrom("default", "spring.test.compute")).isInstanceOf(InvalidSettingException.class)
                    .extracting(e -> ((InvalidSettingException) e).property()).isEqualTo("spring.test.compute.memory.recording.max-events");
        });
    }

    @Test
    void eachManagerTheStarterBuildsHasARelayForItsEvents() {
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=8MB").run(context -> {
            UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
            MemoryEventRelays.Relay relay = context.getBean(MemoryEventRelays.class).of(manager).orElseThrow();
            List<String> heard = new CopyOnWriteArrayList<>();
            try (AutoCloseable attached = relay.attach(new MemoryEventListener() {
                @Override
                public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                    heard.add(location + " " + bytes);
                }
            })) {
                manager.allocate(1 << 20, MemoryLocation.HOST).close();
            }
            manager.releaseCachedMemory();
            manager.allocate(1 << 20, MemoryLocation.HOST).close();
            assertThat(heard).as("heard while attached, not after").hasSize(1).allSatisfy(event -> assertThat(event).startsWith("HOST "));
        });
    }

    /** Closes the buffer it holds when memory runs out, then asks for a retry. */
    @Configuration(proxyBeanMethods = false)
    static class FreeingHandler implements OutOfMemoryHandler {
        final AtomicReference<UnifiedBuffer> held = new AtomicReference<>();
        final List<String> calls = new CopyOnWriteArrayList<>();

        @Override
        public boolean onOutOfMemory(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure) {
            calls.add(location + " " + requestedBytes + " attempt " + attempt);
            UnifiedBuffer buffer = held.getAndSet(null);
            if (buffer == null) {
                return false;
            }
            buffer.close();
            return true;
        }
    }

    /** An application's cache of buffers, made with the manager whose memory it gives back when that runs out. */
    static class CacheOfBuffers implements OutOfMemoryHandler {
        private final UnifiedMemoryManager manager;
        private final AtomicReference<UnifiedBuffer> held = new AtomicReference<>();
        volatile int evictions;

        CacheOfBuffers(UnifiedMemoryManager manager) {
            this.manager = manager;
        }

        void fill(long bytes) {
            held.set(manager.allocate(bytes, MemoryLocation.HOST));
        }

        @Override
        public boolean onOutOfMemory(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure) {
            UnifiedBuffer buffer = held.getAndSet(null);
            if (buffer == null) {
                return false;
            }
            buffer.close();
            evictions++;
            return true;
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class Customizers {
        final List<String> applied = new CopyOnWriteArrayList<>();

        @Bean
        @Order(2)
        UnifiedMemoryManagerBuilderCustomizer second() {
            return builder -> applied.add("second");
        }

        @Bean
        @Order(1)
        UnifiedMemoryManagerBuilderCustomizer first() {
            return new UnifiedMemoryManagerBuilderCustomizer() {
                @Override
                public void customize(UnifiedMemoryManagerBuilder builder) {}

                @Override
                public boolean appliesTo(String managerName) {
                    applied.add("first " + managerName + "?");
                    return false;
                }
            };
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OnlySmall {

        @Bean
        @Order(3)
        UnifiedMemoryManagerBuilderCustomizer onlySmall(Customizers customizers) {
            return UnifiedMemoryManagerBuilderCustomizer.forManager("small", builder -> {
                customizers.applied.add("only small");
                builder.leakDetection(LeakDetectionLevel.DISABLED);
            });
        }
    }
}
