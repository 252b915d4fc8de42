package dev.compute.boot.actuate.endpoint;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The response the starter's README shows for {@code GET /actuator/computememory} has the fields the endpoint answers
 * (trimmed, as it says, to one location), and the definitions it repeats are the endpoint's own.
 */
class ReadmeEndpointExampleTests {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    @Test
    void theReadmesResponseHasTheFieldsTheEndpointAnswers() throws Exception {
        String readme = Files.readString(Path.of("README.md"));
        int example = readme.indexOf("```json\n", readme.indexOf("curl localhost:8080/actuator/computememory"));
        JsonNode documented = JSON.readTree(readme.substring(example + "```json\n".length(), readme.indexOf("```", example + 7)));
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build()) {
            ComputeMemoryEndpoint endpoint = new ComputeMemoryEndpoint(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager));
            JsonNode answered = JSON.readTree(JSON.writeValueAsString(endpoint.summary()));
            assertThat(fields(documented, "")).as("fields of the README's response (one manager, one location)")
                    .isEqualTo(fields(answered, ""));
            assertThat(JSON.convertValue(documented.get("definitions"), Map.class)).isEqualTo(ComputeMemoryEndpoint.DEFINITIONS);
        }
    }

    /** The paths of an object's fields; of the locations and managers, the first one's, as the README trims them. */
    private static Set<String> fields(JsonNode node, String path) {
        Set<String> fields = new TreeSet<>();
        for (Map.Entry<String, JsonNode> field : node.properties()) {
            if (field.getKey().equals("...") || path.equals("definitions.")) {
                continue;
            }
            boolean trimmed = path.equals("locations.") || path.equals("managers.");
            String name = path + (trimmed ? "*" : field.getKey());
            fields.add(name);
            if (field.getValue().isObject()) {
                fields.addAll(fields(field.getValue(), name + "."));
            }
            if (trimmed) {
                break;
            }
        }
        return fields;
    }
}
