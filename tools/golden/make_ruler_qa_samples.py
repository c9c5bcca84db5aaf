#!/usr/bin/env python3
"""Writes the tiny SQuAD v2 and HotpotQA samples bundled in data/ruler/ for kvaudit's RULER qa_1/qa_2
tests. The text is original, written for kvaudit and dedicated to the public domain (CC0 1.0), in the
field layout of SQuAD v2.0 dev (`dev-v2.0.json`) and HotpotQA dev-distractor
(`hotpot_dev_distractor_v1.json`). No data from either data set is included.

Rerun (no dependencies beyond Python 3):  python3 tools/golden/make_ruler_qa_samples.py
"""
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parents[2] / "data" / "ruler"

ARTICLES = [
    ("Harbor_Town", [
        ("The harbor town of Velmora was founded by fishing families who arrived from the northern "
         "islands. Its first pier was built from oak in the spring of the town's third year, and "
         "it still stands beside the newer stone quay.",
         [("Who founded Velmora?", "fishing families"),
          ("What wood was the first pier built from?", "oak")],
         ["Which king ordered the stone quay?"]),
        ("Velmora's lighthouse stands on a granite point east of the harbor. Its lamp was first lit "
         "with whale oil and later converted to electric light. The keeper's cottage is now a small "
         "museum about the coast.",
         [("What is the lighthouse built on?", "a granite point"),
          ("What is the keeper's cottage now?", "a small museum")],
         []),
        ("Every autumn the town holds a rope festival, where crews race to splice two lines "
         "together. The record time of forty-one seconds was set by a crew from the net makers' "
         "guild.",
         [("What is the record splicing time?", "forty-one seconds")],
         ["How many crews entered the first festival?"]),
    ]),
    ("Glass_Observatory", [
        ("The Glass Observatory sits on a ridge above the valley of Tarn. It houses a refracting "
         "telescope with a lens sixty centimeters across, ground by a local instrument maker over "
         "four winters.",
         [("How wide is the telescope lens?", "sixty centimeters"),
          ("How long did grinding the lens take?", "four winters")],
         []),
        ("Astronomers at the observatory catalogued more than two thousand variable stars. Their "
         "catalogue was printed in a single volume bound in blue cloth and sent to libraries "
         "across the continent.",
         [("What color cloth bound the catalogue?", "blue"),
          ("How many variable stars were catalogued?", "more than two thousand")],
         []),
    ]),
    ("River_Mill", [
        ("The old river mill at Carrow ground barley and rye for nearly two centuries. Its wheel is "
         "an undershot design, turned by the current rather than by water falling from above.",
         [("What grain did the mill grind?", "barley and rye"),
          ("What kind of wheel does the mill have?", "an undershot design")],
         ["Who owned the mill when it closed?"]),
        ("After the mill closed, volunteers restored the wheel and the millstones. On open days "
         "the mill now grinds flour that is sold to bakers in the nearby market town of Sellby.",
         [("Where is the flour sold?", "Sellby")],
         []),
    ]),
]

HOTPOT = [
    {"_id": "kv0001", "question": "Which town has the older structure, the pier of Velmora or the mill at Carrow?",
     "answer": "Carrow", "type": "comparison", "level": "medium",
     "supporting_facts": [["Velmora pier", 0], ["Carrow mill", 0]],
     "context": [["Velmora pier", ["The oak pier of Velmora was built about one hundred and sixty years ago.", " It stands beside the stone quay."]],
                 ["Carrow mill", ["The mill at Carrow was built roughly two hundred and ten years ago.", " It ground barley and rye."]],
                 ["Sellby market", ["Sellby holds a market every Thursday.", " Bakers there buy flour from Carrow."]],
                 ["Tarn valley", ["The valley of Tarn lies below a long ridge.", " A glass observatory stands on the ridge."]]]},
    {"_id": "kv0002", "question": "What instrument maker ground the lens of the observatory above the valley where the river Osk rises?",
     "answer": "Imre Halden", "type": "bridge", "level": "hard",
     "supporting_facts": [["River Osk", 0], ["Glass Observatory lens", 1]],
     "context": [["River Osk", ["The river Osk rises in the valley of Tarn.", " It flows south to the sea."]],
                 ["Glass Observatory lens", ["The observatory lens is sixty centimeters across.", " It was ground by the instrument maker Imre Halden."]],
                 ["Velmora lighthouse", ["The lighthouse of Velmora stands on granite.", " Its keeper's cottage is a museum."]],
                 ["Rope festival", ["The rope festival takes place each autumn.", " Crews race to splice lines."]]]},
    {"_id": "kv0003", "question": "In which season is the festival held in the town whose lighthouse stands on granite?",
     "answer": "autumn", "type": "bridge", "level": "easy",
     "supporting_facts": [["Velmora lighthouse", 0], ["Rope festival", 0]],
     "context": [["Velmora lighthouse", ["The lighthouse of Velmora stands on granite.", " Its keeper's cottage is a museum."]],
                 ["Rope festival", ["The rope festival takes place each autumn.", " Crews race to splice lines."]],
                 ["Carrow mill", ["The mill at Carrow was built roughly two hundred and ten years ago.", " It ground barley and rye."]],
                 ["Tarn valley", ["The valley of Tarn lies below a long ridge.", " A glass observatory stands on the ridge."]]]},
]


def squad():
    data = []
    qid = 0
    for title, paragraphs in ARTICLES:
        ps = []
        for context, answerable, impossible in paragraphs:
            qas = []
            for question, answer in answerable:
                start = context.index(answer)
                qid += 1
                qas.append({"question": question, "id": f"kv{qid:04d}",
                            "answers": [{"text": answer, "answer_start": start}],
                            "is_impossible": False})
            for question in impossible:
                qid += 1
                qas.append({"plausible_answers": [], "question": question, "id": f"kv{qid:04d}",
                            "answers": [], "is_impossible": True})
            ps.append({"qas": qas, "context": context})
        data.append({"title": title, "paragraphs": ps})
    return {"version": "v2.0", "data": data}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "squad_v2_sample.json").write_text(json.dumps(squad(), indent=1) + "\n")
    (OUT / "hotpotqa_sample.json").write_text(json.dumps(HOTPOT, indent=1) + "\n")


if __name__ == "__main__":
    main()
