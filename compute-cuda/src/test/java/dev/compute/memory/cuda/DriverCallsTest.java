package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.testing.NativeCallSites;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import jcuda.CudaException;
import jcuda.driver.CUresult;
import org.junit.jupiter.api.Test;

/**
 * {@link DriverCalls} gives back every code JCuda's exception mode turns into an exception, and no class of the backend
 * calls JCuda's driver functions around it. Plain Java: no driver needed. What the backend does with the mode on is
 * {@code CudaBackendOnFakeDriverTest.withJCudasExceptionsOnTheScenarioEndsAlike}.
 */
class DriverCallsTest {

    @Test
    void everyResultJCudaNamesIsItsCodeAgain() throws IllegalAccessException {
        int checked = 0;
        for (Field field : CUresult.class.getFields()) {
            if (field.getType() == int.class && Modifier.isStatic(field.getModifiers()) && field.getInt(null) != CUresult.CUDA_SUCCESS) {
                int code = field.getInt(null);
                assertThat(DriverCalls.result(new CudaException(CUresult.stringFor(code)))).as(field.getName()).isEqualTo(code);
                checked++;
            }
        }
        assertThat(checked).as("CUresult's codes").isGreaterThan(50);
        assertThat(DriverCalls.result(new CudaException(CUresult.stringFor(CUresult.CUDA_ERROR_NOT_READY))))
                .isEqualTo(CudaResults.NOT_READY);
    }

    @Test
    void aCodeJCudaDoesNotKnowComesBackAsItsNumber() {
        assertThat(DriverCalls.result(new CudaException(CUresult.stringFor(123_457)))).isEqualTo(123_457);
    }

    @Test
    void anExceptionNamingNoResultIsThrownAgain() {
        CudaException other = new CudaException("Could not load the native library");
        assertThatThrownBy(() -> DriverCalls.result(other)).isSameAs(other);
        CudaException garbled = new CudaException("INVALID CUresult: twelve");
        assertThatThrownBy(() -> DriverCalls.result(garbled)).isSameAs(garbled);
    }

    @Test
    void noClassOfTheBackendCallsJCudasDriverFunctionsButDriverCalls() throws Exception {
        assertThat(NativeCallSites.outside(CudaBackend.class, "jcuda/driver/JCudaDriver", "cu", "dev/compute/memory/cuda/DriverCalls", 20))
                .as("JCuda driver calls outside DriverCalls").isEmpty();
    }
}
