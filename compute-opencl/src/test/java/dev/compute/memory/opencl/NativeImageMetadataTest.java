package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.NativeImageMetadata;
import org.junit.jupiter.api.Test;

/** The GraalVM metadata in this jar registers the op set's kernel source, where {@link OpenClKernelOps} reads it. */
class NativeImageMetadataTest {

    @Test
    void registersTheOpSetsKernelSource() throws Exception {
        NativeImageMetadata metadata = NativeImageMetadata.of("dev.compute", "compute-opencl");
        String source = OpenClKernelOps.class.getPackageName().replace('.', '/') + "/" + OpenClKernelOps.SOURCE;

        assertThat(metadata.resourceGlobs()).containsExactly(source);
        assertThat(OpenClKernelOps.class.getClassLoader().getResource(source)).isNotNull();
        assertThat(metadata.downcalls()).isEmpty();
    }
}
