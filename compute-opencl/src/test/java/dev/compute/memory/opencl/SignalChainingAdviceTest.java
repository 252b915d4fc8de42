package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Who is told to preload libjsig: users of PoCL whose JVM runs without it, no one else. */
class SignalChainingAdviceTest {

    private static final String POCL = "Portable Computing Language";

    @Test
    void poclWithoutLibjsigIsToldWhatToPreloadAndWhy() {
        assertThat(OpenClBackend.signalChainingAdvice(POCL, null)).contains("LD_PRELOAD=$JAVA_HOME/lib/libjsig.so")
                .contains("CL_BUILD_PROGRAM_FAILURE").contains("SIGSEGV");
        assertThat(OpenClBackend.signalChainingAdvice(POCL, "/opt/profiler/libagent.so")).isNotNull();
    }

    @Test
    void libjsigPreloadedOrAnotherPlatformNeedsNothing() {
        assertThat(OpenClBackend.signalChainingAdvice(POCL, "/usr/lib/jvm/temurin-25/lib/libjsig.so")).isNull();
        assertThat(OpenClBackend.signalChainingAdvice("NVIDIA CUDA", null)).isNull();
    }
}
