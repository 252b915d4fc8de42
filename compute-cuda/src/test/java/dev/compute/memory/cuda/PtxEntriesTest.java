package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.contract.KernelContractTest;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The PTX reader that launches are checked against: plain text, no GPU. */
class PtxEntriesTest {

    @Test
    void readsTheEntriesAndTheirParametersAsNvccWritesThem() {
        assertThat(PtxEntries.read(KernelContractTest.PTX)).containsOnlyKeys("affine", "scale_in_place", "iota2d", "clamp_f64")
                .containsEntry("affine", List.of(PtxEntries.Kind.BITS64, PtxEntries.Kind.BITS64, PtxEntries.Kind.BITS64,
                        PtxEntries.Kind.FLOAT32, PtxEntries.Kind.FLOAT64, PtxEntries.Kind.BITS32))
                .containsEntry("iota2d", List.of(PtxEntries.Kind.BITS64, PtxEntries.Kind.BITS32, PtxEntries.Kind.BITS32));
    }

    @Test
    void structsByValueAndSmallTypesFitNoArgumentAndAnEntryWithoutParametersTakesNone() {
        String ptx = """
                .visible .entry by_value(
                    .param .align 8 .b8 by_value_param_0[16],
                    .param .u16 by_value_param_1,
                    .param .u64 .ptr .global .align 4 by_value_param_2
                )
                { ret; }
                .entry nothing()
                { ret; }
                """;
        assertThat(PtxEntries.read(ptx))
                .containsEntry("by_value", List.of(PtxEntries.Kind.OTHER, PtxEntries.Kind.OTHER, PtxEntries.Kind.BITS64))
                .containsEntry("nothing", List.of());
    }
}
