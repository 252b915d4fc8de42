package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.spi.ComputeBackend;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

class CountingBackendTest {

    /**
     * Every method of the SPI, a default one included (a bound, a wait, a close with a deadline), reaches the backend
     * it wraps: a default left to the interface would answer for the replay with the SPI's stand-in, not the backend's.
     */
    @Test
    void forwardsEveryMethodOfTheSpiToTheBackendItWraps() throws Exception {
        List<Method> reached = new ArrayList<>();
        ComputeBackend recording = (ComputeBackend) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> {
                    reached.add(method);
                    return valueOf(method.getReturnType());
                });
        CountingBackend counting = new CountingBackend(recording);

        List<Method> spi = Arrays.stream(ComputeBackend.class.getMethods())
                .filter(method -> !Modifier.isStatic(method.getModifiers()))
                .toList();
        for (Method method : spi) {
            reached.clear();
            Object[] arguments = Arrays.stream(method.getParameterTypes()).map(CountingBackendTest::valueOf).toArray();
            method.invoke(counting, arguments);
            assertThat(reached).as("%s reaches the wrapped backend", method).containsExactly(method);
        }
        assertThat(spi).extracting(Method::getName).contains("awaitIdle", "close", "maxAllocationBytes");
    }

    /** A value of the type, for the arguments and the recording backend's answers: null where a reference does. */
    private static Object valueOf(Class<?> type) {
        if (type == boolean.class) {
            return false;
        }
        if (type == long.class) {
            return 0L;
        }
        if (type == Optional.class) {
            return Optional.empty();
        }
        if (type == Set.class) {
            return Set.of();
        }
        return null;
    }
}
