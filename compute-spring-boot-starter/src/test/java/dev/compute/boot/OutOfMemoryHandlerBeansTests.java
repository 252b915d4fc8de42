package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.OutOfMemoryReason;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.BeanCreationNotAllowedException;
import org.springframework.beans.factory.ObjectProvider;

/** The handler beans as the manager sees them: asked in order until one asks for a retry, and none while the context shuts down. */
class OutOfMemoryHandlerBeansTests {

    private final DeviceOutOfMemoryException failure = new DeviceOutOfMemoryException(MemoryLocation.DEVICE, 4096,
            OutOfMemoryReason.DEVICE_MEMORY, "out of DEVICE memory");

    private static ObjectProvider<OutOfMemoryHandler> provider(Stream<OutOfMemoryHandler> handlers) {
        return new ObjectProvider<>() {
            @Override
            public OutOfMemoryHandler getObject() {
                throw new UnsupportedOperationException();
            }

            @Override
            public Stream<OutOfMemoryHandler> orderedStream() {
                return handlers;
            }
        };
    }

    private static OutOfMemoryHandler answering(List<String> asked, String name, boolean retry) {
        return (location, bytes, attempt, failure) -> {
            asked.add(name);
            return retry;
        };
    }

    @Test
    void theHandlersAreAskedInOrderUntilOneAsksForARetry() {
        List<String> asked = new ArrayList<>();
        OutOfMemoryHandlerBeans beans = new OutOfMemoryHandlerBeans(provider(Stream.of(
                answering(asked, "first", false), answering(asked, "second", true), answering(asked, "third", true))));

        assertThat(beans.onOutOfMemory(MemoryLocation.DEVICE, 4096, 1, failure)).isTrue();
        assertThat(asked).containsExactly("first", "second");
    }

    @Test
    void whileTheContextShutsDownNoHandlerIsAskedAndTheAllocationFailsAsOutOfMemory() {
        OutOfMemoryHandlerBeans beans = new OutOfMemoryHandlerBeans(provider(Stream.generate(() -> {
            throw new BeanCreationNotAllowedException("cacheEvictingHandler",
                    "Singleton bean creation not allowed while singletons of this factory are in destruction");
        })));

        assertThat(beans.onOutOfMemory(MemoryLocation.DEVICE, 4096, 1, failure)).isFalse();
        assertThat(failure.getSuppressed()).singleElement().isInstanceOf(BeanCreationNotAllowedException.class);
    }
}
