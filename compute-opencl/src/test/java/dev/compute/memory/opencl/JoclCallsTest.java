package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.NativeCallSites;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.cl_mem;
import org.junit.jupiter.api.Test;

/**
 * {@link JoclCalls} answers a failing call's status with JOCL's exception mode on as with it off, and no class of the
 * backend calls JOCL's functions around it. What the backend does with the mode on:
 * {@code OpenClKernelTest.withJoclsExceptionModeOnTheBackendsOwnFailuresStayItsOwn}.
 */
class JoclCallsTest {

    @Test
    void noClassOfTheBackendCallsJoclsFunctionsButJoclCalls() throws Exception {
        assertThat(NativeCallSites.outside(OpenClBackend.class, "org/jocl/CL", "cl", "dev/compute/memory/opencl/JoclCalls", 15))
                .as("JOCL calls outside JoclCalls").isEmpty();
    }

    @Test
    void withJoclsExceptionsOnAFailingCallAnswersItsStatusAndACreateItsErrorCode() {
        OpenClTestSupport.requireOpenCl();
        try (OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings())) {
            CL.setExceptionsEnabled(true);
            try {
                assertThat(JoclCalls.clGetPlatformInfo(backend.device().platformId(), 0x7fff, 0, null, null)).isEqualTo(CL.CL_INVALID_VALUE);
                int[] error = {CL.CL_SUCCESS};
                cl_mem none = JoclCalls.clCreateBuffer(backend.context(), CL.CL_MEM_READ_WRITE, 0, null, error);
                assertThat(none).isNull();
                assertThat(error[0]).isEqualTo(CL.CL_INVALID_BUFFER_SIZE);
                Pointer noMemory = JoclCalls.clSVMAlloc(backend.context(), CL.CL_MEM_READ_WRITE, 0, 0);
                assertThat(noMemory).as("no SVM allocation of 0 bytes").isNull();
            } finally {
                CL.setExceptionsEnabled(false);
            }
        }
    }
}
